"""The data stage: a data-bound baseline has its data knobs tried first, one at a time
(``tune``'s data stage, the sweep's neighbours); one that is not goes on as before."""

from __future__ import annotations

import pytest

from autotune.cli import main
from autotune.study.schema.stages import stage_results
from tests.report.test_data_bound import SHORT, _image_overrides

#: Threads first in knob order: only the data-bound rule puts the data knobs before it.
KNOBS = {"runtime.threads": [2, 1], "data.num_workers": [1, 2], "data.prefetch": [16, 64]}
#: One data worker waits on data for half of each step (the fake trial's script).
DATA_BOUND = [{"when": {"data.num_workers": 1}, "share": 0.5}]


def _changes(study) -> list[str]:
    """Each launched trial after the baseline, as the one knob it changes."""
    trials = sorted((t for t in study.trials if t.user_attrs.get("launched")),
                    key=lambda t: t.number)
    base = trials[0].params
    return [next(f"{k}={v}" for k, v in t.params.items() if v != base[k]) for t in trials[1:]]


def test_neighbours_of_a_data_bound_baseline_change_the_data_knobs_first(harness):
    harness.script(data_wait=DATA_BOUND)
    space = harness.space("mixed", KNOBS)
    code, _, err = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true")
    assert code == 0, err
    # Rule: the baseline waits on data half its step, so its data knobs go before threads.
    assert _changes(harness.study()) == ["data.num_workers=2", "data.prefetch=64"]


def test_neighbours_of_a_baseline_not_data_bound_change_the_data_knobs_last(harness):
    harness.script()
    # The data knobs first in knob order: only the rule puts threads before them.
    space = harness.space("data_first", {"data.num_workers": [1, 2], "data.prefetch": [16, 64],
                                         "runtime.threads": [2, 1]})
    code, _, err = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true")
    assert code == 0, err
    # Rule: the baseline measured no data wait: its pipeline keeps up, so the knobs that
    # could give it time go first, the data knobs after them, in the space's order.
    assert _changes(harness.study()) == ["runtime.threads=1", "data.num_workers=2"]


def test_tune_data_stage_tries_each_data_knob_then_the_sweep_goes_on(harness):
    harness.script(data_wait=DATA_BOUND)
    space = harness.space("mixed", KNOBS)
    args = ["tune", *harness.overrides(space, "tune.stages=[data,throughput]",
                                       "sweep.n_trials=4")]
    assert main(args) == 0
    out = harness.capsys.readouterr().out
    stage = stage_results(harness.study())["data"]
    # Rule: the data stage launches the baseline and then each data knob's change, alone,
    # before anything else; the throughput stage's sweep launches the rest of the budget.
    assert stage.data_bound and len(stage.trials) == 2
    assert _changes(harness.study())[:2] == ["data.num_workers=2", "data.prefetch=64"]
    assert len(_changes(harness.study())) == 3
    assert "the baseline (trial #0) is data-bound: it spent 50.0 %" in out
    assert "best data change: data.num_workers=2" in out
    # Rule: each change's figure is the sweep's one gain over the baseline, with its
    # interval (the leaderboard's), not a ratio of first runs without one.
    assert "over the baseline" in out and "95 % CI" in out.split("best data change")[0]


def test_tune_data_stage_on_a_baseline_not_data_bound_launches_only_it(harness):
    harness.script()
    space = harness.space("mixed", KNOBS)
    assert main(["tune", *harness.overrides(space, "tune.stages=[data]")]) == 0
    stage = stage_results(harness.study())["data"]
    # Rule: nothing to fix in the pipeline: the stage measures the baseline and stops.
    assert stage.data_bound is False
    assert "is not data-bound: data wait 0.0 %" in stage.lines[0]
    assert _changes(harness.study()) == []


@pytest.mark.slow
def test_tune_data_stage_on_the_image_preset(harness):
    space = harness.space("workers", {"data.num_workers": [1, 2]})
    # Slow enough storage (20 ms a sample: 50 samples/s at one worker, a third of the
    # step's rate) and a shallow prefetch, so that a few steps show it even under load.
    overrides = _image_overrides(harness, space, "workload=image_cnn_io", *SHORT,
                                 "workload.options.io_wait_ms=20", "data.prefetch=2",
                                 "tune.stages=[data]")
    assert main(["tune", *overrides]) == 0
    out = harness.capsys.readouterr().out
    # Rule: the image job counts samples: its progress lines say samples/s, never tokens.
    assert "trial   0 ok" in out and "samples/s" in out and "tok/s" not in out, out
    stage = stage_results(harness.study())["data"]
    # Rule: one worker on slow storage is data-bound by the real measurement, and the
    # stage tries the second worker next.
    assert stage.data_bound and stage.baseline == 0, stage
    assert _changes(harness.study()) == ["data.num_workers=2"]


def test_the_stage_line_gives_both_rates_in_samples_per_second():
    from types import SimpleNamespace

    from autotune.stages.data import _pipeline
    from trials.contract.performance import Performance

    record = SimpleNamespace(data_wait_share=0.002, perf=Performance(
        pipeline_samples_per_s=4796.0, compute_samples_per_s=16.0))
    # Rule: what the pipeline delivers and what the step consumes, each with its unit.
    assert _pipeline(record) == ("data wait 0.2 % of its step time, its pipeline alone "
                                 "delivers 4,796 samples/s, its step alone consumes 16 "
                                 "samples/s")
