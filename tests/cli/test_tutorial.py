"""The tutorial's output blocks are a recorded run's, and every line they quote is still
said by the code.

``docs/tutorial/recorded/`` holds what the tutorial's commands printed on a fresh clone
(the commit and date in its README). A quoted line that the recording does not hold was
edited by hand; a line of prose whose words the code no longer writes (a message reworded,
a section renamed) makes the tutorial show output no run prints any more.
"""

from __future__ import annotations

import re
import tokenize
from functools import cache

import pytest

from tests.conftest import ROOT

TUTORIAL = ROOT / "docs" / "tutorial.md"
RECORDED = ROOT / "docs" / "tutorial" / "recorded"
#: A quoted line is prose when it holds three words in a row (one space apart); a knob list,
#: a number or a table row is data, which the recording alone vouches for.
PROSE = re.compile(r"[A-Za-z]{2,}(?:[,;:)]? [(]?[A-Za-z]{2,}){2,}")
#: The least literal text (placeholders aside) a string of the code must share with a line
#: to count as the code saying it.
MIN_LITERAL = 12
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def quoted_lines() -> list[str]:
    """Every non-empty line of the tutorial's ```text blocks (an elision '...' aside)."""
    blocks = re.findall(r"```text\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    return [line.rstrip() for block in blocks for line in block.splitlines()
            if line.strip() and line.strip() != "..."]


def recorded_lines() -> set[str]:
    return {line.rstrip() for path in RECORDED.glob("*.txt")
            for line in path.read_text().splitlines()}


def _templates_of(body: str, is_f: bool) -> list[tuple[str, int]]:
    """A string literal's printed lines as (pattern, literal characters): its text, each
    placeholder any text; and the literals written inside its placeholders
    (``{'vs baseline':<44}``)."""
    out = []
    for line in body.split("\\n"):
        pieces = PLACEHOLDER.split(line) if is_f else [line]
        literal = sum(len(piece) for piece in pieces)
        if literal >= MIN_LITERAL:
            out.append((".*?".join(re.escape(piece) for piece in pieces), literal))
    if is_f:
        for inner in PLACEHOLDER.findall(body):
            out += [(re.escape(text), len(text)) for text in re.findall(r"'([^'{}]+)'", inner)
                    if len(text) >= MIN_LITERAL]
    return out


@cache
def code_templates() -> tuple[tuple[re.Pattern, int], ...]:
    """Every string literal of the orchestrator and the trial program as the lines it can
    print: what the code says, word for word, its values left open."""
    found: set[tuple[str, int]] = set()
    for package in ("autotune", "trials"):
        for path in sorted((ROOT / package).rglob("*.py")):
            with path.open() as fh:
                for token in tokenize.generate_tokens(fh.readline):
                    if token.type != tokenize.STRING:
                        continue
                    prefix = re.match(r"^[rRbBuUfF]*", token.string).group(0)
                    body = re.sub(r"^[rRbBuUfF]*('\'\'|\"\"\"|'|\")", "", token.string)
                    body = re.sub(r"('\'\'|\"\"\"|'|\")$", "", body)
                    found.update(_templates_of(body, "f" in prefix.lower()))
    return tuple((re.compile(pattern), literal) for pattern, literal in sorted(found))


def said_by_the_code(line: str) -> bool:
    """Some string of the code prints this line: a template matches it whose own text is at
    least MIN_LITERAL characters and 40 % of the line's longest run of words (so a message
    whose sentence was reworded is not vouched for by a short prefix it kept)."""
    longest = max((len(m.group(0)) for m in PROSE.finditer(line)), default=0)
    needed = max(MIN_LITERAL, 0.4 * longest)
    return any(literal >= needed and template.search(line)
               for template, literal in code_templates())


def test_the_tutorial_quotes_output():
    # Rule: the tutorial shows real output (a test of nothing would pass on no block).
    assert len(quoted_lines()) >= 20


def test_every_quoted_line_comes_from_the_recorded_run():
    recorded = recorded_lines()
    missing = [line for line in quoted_lines() if line not in recorded]
    # Rule: an output block holds only lines the recorded run printed, as it printed them.
    assert not missing, missing


@pytest.mark.parametrize("line", [line for line in quoted_lines() if PROSE.search(line)])
def test_every_quoted_line_of_prose_is_still_said_by_the_code(line):
    # Rule: a quoted sentence the code no longer writes fails here, naming the line.
    assert said_by_the_code(line), line


def test_a_reworded_message_would_fail():
    # The rule above can fail: a line the code does not write is caught.
    assert not said_by_the_code("the pick was chosen by a coin that nobody tossed today")
    prose = [line for line in quoted_lines() if PROSE.search(line)]
    assert prose and all(said_by_the_code(line) for line in prose)
