"""autotune.presentation.findings: one finding per rule that fired, rendered as a list."""

from __future__ import annotations

from autotune.presentation.findings import Finding, to_markdown


def test_each_finding_is_one_line_with_its_rule_and_none_says_so():
    text = to_markdown([Finding("best", (1,), "Trial #1 is best."),
                        Finding("data_wait", (), "Waits for data.")])
    # Rule: a heading, then one "- **rule**: sentence" line per finding, in order.
    assert text == ("# Diagnosis\n\n- **best**: Trial #1 is best.\n"
                    "- **data_wait**: Waits for data.\n")
    # Rule: no finding is said plainly, never an empty section.
    assert to_markdown([]) == "# Diagnosis\n\n- Nothing to report.\n"


def test_a_finding_hashes_without_its_numbers():
    # Rule: numbers (a dict) are left out of the hash, so findings can live in sets.
    a = Finding("best", (1,), "s", {"change": 0.5})
    assert hash(a) == hash(Finding("best", (1,), "s", {"change": 0.9}))
    assert len({a, Finding("best", (2,), "s")}) == 2
