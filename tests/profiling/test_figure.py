"""autotune.profiling.figure: the "Where the time goes" figure of a profile."""

from __future__ import annotations

from autotune.profiling.figure import COLOURS, where_the_time_goes
from trials.contract.breakdown import CATEGORIES, MemoryCurve, OpRow
from trials.contract.events import ProfileRecord

PNG = b"\x89PNG\r\n\x1a\n"


def profile(memory: MemoryCurve | None) -> ProfileRecord:
    return ProfileRecord(step_s=0.1, seconds={"forward": 0.04, "backward": 0.05},
                         top_ops=[OpRow(type="MatMul", category="forward", share=0.3)],
                         memory=memory or MemoryCurve())


def test_every_category_has_a_colour():
    # Rule: each part of the step split is drawn in its own colour (no KeyError).
    assert set(CATEGORIES) <= set(COLOURS)
    assert len({COLOURS[c] for c in CATEGORIES}) == len(CATEGORIES)


def test_the_figure_is_written_with_or_without_a_memory_curve(tmp_path):
    curve = MemoryCurve(t_s=[0.0, 0.1], mib=[10.0, 12.0], mean_mib=11.0, source="host RSS")
    # Rule: a PNG at the path asked, with a memory curve or without one.
    for name, memory in (("with.png", curve), ("without.png", None)):
        path = where_the_time_goes(profile(memory), tmp_path / name, title="t")
        assert path == tmp_path / name and path.read_bytes().startswith(PNG)
