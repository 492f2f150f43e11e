"""Sweeps that cannot find anything end at once with one line (autotune/study/futility.py):
a baseline that diverged at step 1 when no knob of the space can change that, and a sweep
in which every trial ended without a result."""

from __future__ import annotations

from autotune.study.futility import baseline_diverged, diverged_at_step_1, nothing_completed
from autotune.study.sweep_end import EndKind
from tests.fakes import rec

AT_STEP_1 = {"correctness": {"finite_loss_steps": 1, "nonfinite_steps": 7}}
LATER = {"correctness": {"finite_loss_steps": 6, "nonfinite_steps": 2}}


def test_a_trial_diverged_at_step_1_only_with_at_most_one_finite_loss():
    # Rule: diverged with at most one finite loss and some non-finite ones; a run that
    # learned for some steps first, or an OOM, is not.
    assert diverged_at_step_1(rec(0, "diverged", card=AT_STEP_1))
    assert not diverged_at_step_1(rec(0, "diverged", card=LATER))
    assert not diverged_at_step_1(rec(0, "oom", card=AT_STEP_1))


def test_a_baseline_diverged_at_step_1_stops_the_sweep_unless_precision_is_a_knob():
    baseline = rec(0, "diverged", card=AT_STEP_1)
    end = baseline_diverged(baseline, {"train.micro_batches": [1, 2]})
    # Rule: the knobs cannot fix the workload: the sweep stops, failed, naming the trial.
    assert end is not None and end.kind is EndKind.STOPPED and end.exit_code == 1
    assert "the baseline (trial 0)" in end.message and "train.lr" in end.message
    # Rule: a space that varies the precision may not diverge (float16 overflows where
    # float32 does not): the sweep goes on.
    assert baseline_diverged(baseline, {"precision": ["fp32", "fp16"]}) is None
    assert baseline_diverged(rec(0, "diverged", card=LATER), {}) is None


def test_a_sweep_where_nothing_completed_fails_and_counts_why():
    records = [rec(0, "oom"), rec(1, "oom"), rec(2, "hang")]
    end = nothing_completed(records)
    # Rule: no trial completed: the sweep failed, with each reason counted, most first.
    assert end is not None and end.failed
    assert "no trial completed: 2 oom, 1 hang" in end.message
    # Rule: every launched trial diverged at step 1: the workload is named, not a knob.
    diverged = [rec(n, "diverged", card=AT_STEP_1) for n in range(3)]
    assert "all 3 launched trial(s) had no finite loss" in nothing_completed(diverged).message


def test_nothing_completed_holds_back_while_a_result_may_still_come():
    # Rule: one completed trial, none ended yet, or another worker's trial still running:
    # the sweep is not futile.
    assert nothing_completed([rec(0, "oom"), rec(1, tokens_per_s=10.0)]) is None
    assert nothing_completed([]) is None
    running = rec(1, "oom", state="RUNNING")
    assert nothing_completed([rec(0, "oom"), running]) is None
