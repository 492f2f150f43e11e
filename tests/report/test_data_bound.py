"""The data-bound preset (workload=image_cnn): data knobs reach the pipeline or are refused,
the pipeline probe runs in every trial, and a data-bound baseline opens the report."""

from __future__ import annotations

import re

import pytest

from autotune.cli import main
from tests.cli.test_cli_errors import assert_one_line_error
from trials.contract.outcomes import Outcome

#: Short, fixed trials of the image preset (a few seconds each on 2 cores).
SHORT = ("run.warmup_steps=1", "run.measure_steps=4", "run.adaptive=false",
         "run.probe_batches=4")


@pytest.mark.slow
def test_data_knobs_reach_the_image_pipeline(run_trial):
    run = run_trial("workload=image_cnn", "data.prefetch=3", "data.num_workers=2", *SHORT,
                    tiny=False)
    assert run.returncode == 0, run.stderr[-2000:]
    applied = run.of("start")[0]["applied"]
    # Rule: the prefetch asked for is what mindspore.dataset reports back, for a workload
    # that never calls set_prefetch_size itself; so are the workers of its ops.
    assert applied["prefetch_size"] == 3
    assert applied["dataset_workers"] == {"Map": 2, "GeneratorDataset": 2}
    perf = run.summary["performance"]
    # Rule: every trial carries the probe: the pipeline alone, the step alone, and its cost.
    for key in ("pipeline_samples_per_s", "compute_samples_per_s", "samples_per_s",
                "probe_s"):
        assert perf[key] > 0, key


@pytest.mark.slow
def test_a_no_op_knob_is_refused_by_the_trial(run_trial):
    run = run_trial("workload=image_cnn", "train.recompute=full", *SHORT, tiny=False)
    # Rule: recompute on a workload without blocks is a config error, not a measurement.
    assert run.returncode == Outcome.CONFIG_ERROR.exit_code
    assert "does nothing for workload image_cnn" in run.end["reason"]
    assert not run.of("step")


def _image_overrides(harness, search: str, *extra: str) -> list[str]:
    base = [o for o in harness.overrides(search, fake=False) if o != "workload=gpt_tiny"]
    return [*base, *extra]


def test_a_no_op_knob_in_the_space_is_refused_before_launch(harness):
    space = harness.space("norecompute", {"train.recompute": ["none", "full"]})
    code = main(["sweep", *_image_overrides(harness, space, "workload=image_cnn")])
    # Rule: one line, exit 2, nothing written: the knob would be searched for nothing.
    err = harness.capsys.readouterr().err
    assert_one_line_error(code, err, "train.recompute=full",
                          "does nothing for workload image_cnn")
    # Rule: it names the space, and the shipped spaces this workload runs (the default
    # space has recompute: a new user's plain `tune` on an image workload met this).
    assert "search space norecompute:" in err and "search=data" in err
    assert "search=default" not in err
    assert not harness.runs.exists()


def test_workers_above_the_cores_are_refused_before_launch(harness):
    import os

    space = harness.space("toomany", {"data.num_workers": [1, (os.cpu_count() or 1) + 1]})
    code = main(["sweep", *_image_overrides(harness, space, "workload=image_cnn")])
    # Rule: MindSpore refuses num_parallel_workers above the cores; so does the space.
    assert_one_line_error(code, harness.capsys.readouterr().err, "exceeds the",
                          "cores of this machine")
    assert not harness.runs.exists()


def bare_samples_per_s(workers: int) -> float:
    """The image_cnn_io job at 20 ms a sample under a bare MindSpore loop (nothing of
    autotune's: bench/data_autotune.py's), samples/s of its measured steps."""
    from bench._common import run_module

    return run_module("bench.data_autotune", [
        "--bare", "--workload", "image_cnn_io", "--io-wait-ms", "20", "--workers",
        str(workers), "--prefetch", "2", "--warmup", "2", "--measure", "8"],
        timeout_s=240)["samples_per_s"]


@pytest.mark.slow
@pytest.mark.solo  # the sweep's pick against a bare script's speeds, measured apart
def test_a_data_bound_baseline_opens_the_report_and_the_pick_is_the_bare_fastest(harness):
    space = harness.space("workers", {"data.num_workers": [1, 2]})
    # 20 ms a sample and a shallow prefetch: a few steps show the wait even under load (at
    # the preset's 6 ms the prefetched batches can hide it from so short a trial).
    overrides = _image_overrides(harness, space, "workload=image_cnn_io", "sweep.n_trials=2",
                                 "sweep.neighbours=true", *SHORT,
                                 "workload.options.io_wait_ms=20", "data.prefetch=2")
    assert main(["sweep", *overrides]) == 0
    out = harness.capsys.readouterr().out
    pick = int(re.search(r"pick \(what export and soak take\): trial #(\d+)", out).group(1))
    workers = harness.study().trials[pick].params["data.num_workers"]
    # Rule: the sweep's pick is the configuration a bare script measures fastest (a second
    # source worker halves the storage wait: ~2x, far outside the noise of a loaded host).
    bare = {w: bare_samples_per_s(w) for w in (1, 2)}
    assert workers == max(bare, key=bare.get), (out, bare)
    assert main(["report", *overrides]) == 0
    diagnosis = (harness.runs / "s" / "report" / "diagnosis.md").read_text()
    first = next(line for line in diagnosis.splitlines() if line.startswith(("-", "*", "1")))
    # Rule: the baseline (one worker on slow storage) is named data-bound first, with the
    # numbers that say so (its data wait, or the probe's samples/s).
    assert "baseline (trial #0) is data-bound" in first, diagnosis
    assert "waiting for input data" in first or "samples/s" in first, first
