"""autotune.report.stages: the report's "Tuning stages" section."""

from __future__ import annotations

from autotune.report.stages import markdown
from autotune.settings import STAGES


def test_every_stage_is_listed_in_order_with_its_state_and_lines():
    lines = markdown({"memory": {"done": True, "lines": ["fits at micro 2"]},
                      "correctness": {"failed": True}, "data": {}})
    listed = [line for line in lines if line.startswith("- **")]
    # Rule: stages appear in the tune order, whatever the results' order.
    assert [line.split("**")[1] for line in listed] == list(STAGES)
    # Rule: done / stopped (failed) / open, and a stage without a result is "not run".
    assert "- **correctness** (stopped)" in lines and "- **memory** (done)" in lines
    assert "- **data** (open)" in lines and "- **stability**: not run" in lines
    # Rule: a stage's lines are nested under it.
    assert lines[lines.index("- **memory** (done)") + 1] == "  - fits at micro 2"


def test_no_stage_results_no_section():
    # Rule: a study that never ran tune has no section at all.
    assert markdown({}) == []
