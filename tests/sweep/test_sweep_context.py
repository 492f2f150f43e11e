"""The sweep's context (autotune/sweep_context.py): checked once, shared by the sweep and
``tune``'s stages; a stage's part of the sweep is a limited copy, never a swap."""

from __future__ import annotations

import pytest

from trials.contract.schema import ConfigError


def test_a_stages_part_of_the_sweep_leaves_the_whole_sweeps_settings_alone(harness):
    context = harness.context({"data.prefetch": [16, 32]}, "sweep.n_trials=5")
    part = context.limited(2)
    # Rule: the part launches at most its limit, the baseline's neighbours first ...
    assert part.settings.n_trials == 2 and part.settings.neighbours
    # ... and the whole sweep still has its own budget and proposal order afterwards.
    assert context.settings.n_trials == 5 and not context.settings.neighbours
    # Rule: a limit past the budget does not raise the budget.
    assert context.limited(9).settings.n_trials == 5
    # Rule: the part shares the checked pieces (one space, one runner, one cost model).
    assert part.space is context.space and part.runner is context.runner


def test_a_space_with_nothing_besides_the_baseline_is_refused_before_anything_is_written(
        harness):
    with pytest.raises(ConfigError, match="nothing to search besides the baseline"):
        harness.context({"data.prefetch": [16]})
    assert not harness.runs.exists()
