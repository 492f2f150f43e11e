"""The documentation site: built with ``mkdocs build --strict`` (no broken link, no page
missing from the nav) and opened in a real browser (Debian's headless Chromium, as the
dashboard's test does): every page loads, every image has a size, the search finds
"calibrate"."""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import yaml

from tests import browser
from tests.conftest import ROOT

needs_browser = pytest.mark.skipif(
    browser.chromium() is None and not os.environ.get("AUTOTUNE_REQUIRE_BROWSER"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")


def nav_pages() -> list[str]:
    """Every page of mkdocs.yml's nav, as its Markdown path under docs/."""
    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold !!python tags; the nav holds none
        pass

    Loader.add_multi_constructor("", lambda loader, tag, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)["nav"]
    pages: list[str] = []

    def walk(items):
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            walk(value) if isinstance(value, list) else pages.append(value)

    walk(nav)
    return pages


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    # Rule: the site builds with --strict: a broken link or anchor, or a page the nav
    # does not list, fails it.
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_every_page_of_docs_is_in_the_nav_and_built(site):
    pages = nav_pages()
    on_disk = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    # Rule: no page of docs/ is left out of the nav, and the nav names no missing page.
    assert sorted(pages) == on_disk
    for page in pages:
        built = site / (page[:-3] + "/index.html" if page != "index.md" else "index.html")
        assert built.is_file(), built


class Handler(http.server.SimpleHTTPRequestHandler):
    """The built site, quietly; ``/wait`` answers after a second of real time."""

    def do_GET(self):
        if self.path == "/wait":
            # Chromium's virtual time stands still while a fetch is pending: this is how the
            # check page gives the search's web worker (real time, not virtual) a second.
            time.sleep(1.0)
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(Handler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


#: Loads each page in an iframe, one after the other, then the home page with ?q=calibrate
#: (Material's search reads it on load: search.share), and writes what it found as JSON:
#: each page's title, first heading and images' natural sizes (0 for one that did not
#: load), and the search's hits once its worker has indexed the site.
CHECK_PAGE = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="page" width="1280" height="800"></iframe><script>
const pages = PAGES, found = {pages: [], hits: []}, frame = document.getElementById("page");
let next = 0;
async function search(tries) {
  await fetch("/wait");
  const items = [...frame.contentDocument.querySelectorAll(".md-search-result__item")];
  if (!items.length && tries > 0) return search(tries - 1);
  found.hits = items.map(i => i.innerHTML);
  document.getElementById("result").textContent = JSON.stringify(found);
}
function load() {
  if (next >= pages.length) {
    frame.onload = () => search(10);
    frame.src = "/?q=calibrate";
    return;
  }
  const url = pages[next++];
  frame.onload = () => setTimeout(() => {
    const doc = frame.contentDocument, h1 = doc.querySelector("article h1");
    found.pages.push({url, title: doc.title, h1: h1 ? h1.textContent : "",
                      images: [...doc.images].map(i => [i.getAttribute("src"), i.naturalWidth,
                                                        i.naturalHeight])});
    load(); }, 100);
  frame.src = url;
}
load();
</script></body></html>"""


@pytest.fixture(scope="module")
def checked(site, served) -> dict:
    """What the check page found, read from its DOM once every page and the search ran."""
    urls = ["/" + (p[:-3] + "/" if p != "index.md" else "") for p in nav_pages()]
    (site / "check.html").write_text(CHECK_PAGE.replace("PAGES", json.dumps(urls)))
    dom = browser.dump_dom(f"{served}/check.html")
    result = re.search(r'<pre id="result">(.*?)</pre>', dom, flags=re.S).group(1)
    assert result != "pending", "the check page did not finish"
    return json.loads(html.unescape(result)) | {"urls": urls}


@needs_browser
def test_every_page_loads_and_every_image_has_a_size(checked):
    assert [page["url"] for page in checked["pages"]] == checked["urls"]
    for page in checked["pages"]:
        # Rule: each page is the site's (not an error page) and has its heading.
        assert page["title"].endswith("autotune") and page["h1"].strip(), page
        for src, width, height in page["images"]:
            # Rule: every image loaded and has a size.
            assert width > 0 and height > 0, (page["url"], src)


@needs_browser
def test_the_search_box_finds_calibrate(checked):
    hits = checked["hits"]
    # Rule: the search finds the word, and the page that tells how to calibrate among it.
    assert hits, "no search result for 'calibrate'"
    assert any("plan-and-calibrate" in hit for hit in hits), hits[:3]
