"""A real browser for the tests: Debian's headless Chromium, driven from the command line.

    dom = dump_dom("http://127.0.0.1:8080/dashboard/studies/1/trials?numbers=0")
    screenshot("http://127.0.0.1:8080/dashboard/", Path("docs/dashboard.png"))

``--virtual-time-budget`` lets the page's JavaScript run (and its API requests finish:
virtual time waits for the network) before the DOM is printed or the picture taken, so
what comes back is the page a person would see, rendered by React, not the HTML shell.
``.ci/run`` installs ``chromium``; :func:`chromium` is None where it is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

#: Virtual milliseconds the page's scripts get before the DOM is read.
BUDGET_MS = 20_000


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(url: str, *flags: str, timeout: float = 120) -> subprocess.CompletedProcess:
    binary = chromium()
    assert binary is not None, "no chromium on PATH (apt-get install chromium)"
    with tempfile.TemporaryDirectory(prefix="autotune-chromium-") as profile:
        # --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start.
        argv = [binary, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                f"--virtual-time-budget={BUDGET_MS}", *flags, url]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def dump_dom(url: str) -> str:
    """The page's DOM after its scripts ran, as HTML."""
    proc = _run(url, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def screenshot(url: str, out: Path, *, width: int = 1280, height: int = 800) -> Path:
    """A PNG of the page after its scripts ran."""
    proc = _run(url, f"--screenshot={out}", f"--window-size={width},{height}",
                "--hide-scrollbars")
    assert proc.returncode == 0 and out.is_file(), proc.stderr[-2000:]
    return out
