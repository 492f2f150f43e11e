"""autotune.presentation.findings: one finding per rule that fired, as the seed's table."""

from __future__ import annotations

from autotune.presentation.findings import SYMPTOMS, Finding, to_markdown


def test_the_diagnosis_is_the_seeds_table_then_each_finding_in_words():
    text = to_markdown([
        Finding("oom", (3, 4), "2 trials ran out of memory (#3, #4): use recompute.",
                {"trials": 2, "peak_memory_gib": 9.5}, cause="m=4 did it: #3 against #0",
                action="use recompute"),
        Finding("data_wait", (), "The step waits for data (31 %): add workers.")])
    lines = text.splitlines()
    # Rule: a table in the seed's form, one row per finding, area and symptom from the
    # declared table, the evidence from its trials and numbers.
    assert lines[2] == "| area | symptom | evidence | likely cause | action |"
    assert lines[4] == ("| memory | trials ran out of memory | trials #3, #4; trials 2, "
                        "peak_memory_gib 9.5 | m=4 did it: #3 against #0 | use recompute |")
    # Rule: a rule that does not state its action apart has what follows its first colon.
    assert lines[5] == "| throughput | the step waits for input data | - | - | add workers |"
    # Rule: then each finding in words, in order.
    assert lines[-2:] == ["- **oom**: 2 trials ran out of memory (#3, #4): use recompute.",
                          "- **data_wait**: The step waits for data (31 %): add workers."]
    # Rule: no finding is said plainly, never an empty section.
    assert to_markdown([]) == "# Diagnosis\n\n- Nothing to report.\n"


def test_every_rule_of_the_diagnosis_has_its_area_and_symptom():
    from autotune.report.diagnosis import diagnose
    from tests.report.test_importance import study_where_stopped_values_matter
    from tests.report.test_report import rec

    records = study_where_stopped_values_matter() + [
        rec(9, "diverged", params={"precision": "fp16"}), rec(10, "diverged"),
        rec(11, "hang"), rec(12, "timeout"), rec(13, "crash"), rec(14, "infeasible")]
    found = diagnose(records, config={"precision": "fp32"})
    # Rule: whatever rule fires, the table knows its area and symptom (SYMPTOMS).
    assert {f.rule for f in found} >= {"pick", "slow", "oom", "diverged_fp16", "diverged",
                                       "hang", "timeout", "crash", "not_run"}
    assert all(f.rule in SYMPTOMS for f in found), [f.rule for f in found]


def test_a_finding_hashes_without_its_numbers():
    # Rule: numbers (a dict) are left out of the hash, so findings can live in sets.
    a = Finding("best", (1,), "s", {"change": 0.5})
    assert hash(a) == hash(Finding("best", (1,), "s", {"change": 0.9}))
    assert len({a, Finding("best", (2,), "s")}) == 2
