"""Structured outcomes, accumulation equivalence, user workloads, checkpoint resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trials.contract.outcomes import Outcome

#: Every test here runs real MindSpore trials.
pytestmark = pytest.mark.slow


def test_absurd_learning_rate_diverges_before_the_update(run_trial):
    run = run_trial("train.lr=1000", "train.clip_norm=1e9", "run.measure_steps=12")
    assert run.returncode == Outcome.DIVERGED.exit_code, run.stderr[-2000:]
    assert run.end["outcome"] == "diverged"
    last = run.of("step")[-1]
    # Rule: the step that triggered the guard did not update the weights.
    assert last["updated"] is False


def test_tight_memory_budget_is_oom(run_trial):
    # The address-space cap is lifted so the measured-peak guard, not a failed allocation
    # somewhere inside MindSpore (a thread that cannot start can hang), ends the trial.
    run = run_trial("guard.memory_budget_gib=0.25", "guard.address_space_factor=1000")
    assert run.returncode == Outcome.OOM.exit_code, run.stderr[-2000:]
    assert run.end["outcome"] == "oom"
    assert "over the memory budget 0.25 GiB" in run.end["reason"]


def test_bad_value_fails_at_compose_time_in_one_line(run_trial):
    run = run_trial("runtime.mode=eager")
    assert run.returncode == Outcome.CONFIG_ERROR.exit_code
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "expected one of [graph, pynative]" in lines[0]
    assert "Traceback" not in run.stderr


def test_impossible_split_is_a_config_error(run_trial):
    run = run_trial("train.global_batch=6", "train.micro_batches=4")
    assert run.returncode == Outcome.CONFIG_ERROR.exit_code
    assert "train.global_batch=6 is not divisible" in run.stderr


def test_accumulation_matches_the_big_batch(run_trial):
    """K micro-batches of B/K must train like one batch of B (mean, not sum, of grads)."""
    common = ("data=synthetic", "run.warmup_steps=0", "run.measure_steps=5",
              "train.clip_norm=1e9")
    big = run_trial(*common, "train.micro_batches=1")
    accumulated = run_trial(*common, "train.micro_batches=4")
    assert big.returncode == 0 and accumulated.returncode == 0, accumulated.stderr[-2000:]
    assert len(big.losses) == 6
    assert accumulated.losses == pytest.approx(big.losses, rel=2e-4)
    norms_big = [s["grad_norm"] for s in big.of("step")]
    norms_acc = [s["grad_norm"] for s in accumulated.of("step")]
    assert norms_acc == pytest.approx(norms_big, rel=1e-3)


def test_user_workload_from_outside_the_package(run_trial):
    run = run_trial("workload.entry=tests.user_workload:make_workload",
                    "workload.name=regression", "train.micro_batches=2")
    assert run.returncode == 0, run.stderr[-2000:]
    start = run.of("start")[0]
    assert start["tokens_per_step"] == 8  # one "token" per sample, global batch 8
    assert start["flops_per_token"] is None  # no FLOPs model: MFU is not invented
    assert "mfu" not in run.summary["performance"]
    assert run.summary["correctness"]["loss_falling"]


def test_checkpoint_resume_continues_the_run(run_trial, tmp_path):
    prod = ("data=synthetic", "run.mode=production", "run.checkpoint_every=2",
            "run.keep_checkpoints=2")
    straight = run_trial(*prod, "run.steps=6", cwd=tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]
    first = run_trial(*prod, "run.steps=3", cwd=tmp_path / "resumed")
    second = run_trial(*prod, "run.steps=6", cwd=tmp_path / "resumed")
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-2000:]
    resumed_steps = [s for s in second.of("step") if s["step"] >= 3]
    assert [s["step"] for s in resumed_steps] == [3, 4, 5]
    assert second.of("start")[-1]["start_step"] == 3
    # Rule: weights, optimizer state and data position all continue exactly.
    assert [s["loss"] for s in resumed_steps] == pytest.approx(straight.losses[3:], rel=1e-5)
    kept = sorted(p.name for p in (tmp_path / "resumed" / "checkpoints").iterdir())
    # Rule: every checkpoint_every steps and at the end; only the newest keep_checkpoints stay.
    assert kept == ["step-00000004.safetensors", "step-00000006.safetensors"]


def test_a_run_started_in_the_repository_root_writes_under_runs_manual(tmp_path, monkeypatch):
    from trials import train
    from trials.contract.launch import PROJECT_ROOT

    manual = tmp_path / "runs" / "manual"
    monkeypatch.setattr(train, "MANUAL_RUN_DIR", manual)
    monkeypatch.chdir(tmp_path)
    # Rule: a run in any other directory (a trial's run directory) stays where it is ...
    assert train.leave_the_sources(tmp_path) is None and Path.cwd() == tmp_path
    # ... and one started in the repository's root moves to runs/manual, so metrics.jsonl,
    # checkpoints and the profile never land among the sources.
    monkeypatch.chdir(PROJECT_ROOT)
    monkeypatch.setattr("sys.argv", ["trials/train.py"])  # as msrun starts it
    assert train.leave_the_sources(PROJECT_ROOT) == manual and Path.cwd() == manual
    # ... with its entry script's path made absolute: MindSpore's compile cache reads the
    # script again by that path (msrun's data-parallel line crashed without it).
    import sys

    assert sys.argv[0] == str(PROJECT_ROOT / "trials" / "train.py")


def test_inputs_turning_nan_under_a_masking_loss_end_diverged(run_trial):
    """A user's workload whose inputs turn NaN at step 5 under a loss that masks them: the
    loss stays finite while every update from step 5 on is skipped."""
    run = run_trial("workload.entry=tests.user_workload:make_nan_workload",
                    "workload.name=regression", "+workload.options.nan_from_step=5",
                    "run.warmup_steps=1", "run.measure_steps=10")
    steps = run.of("step")
    assert all(math.isfinite(s["loss"]) for s in steps), [s["loss"] for s in steps]
    assert [s["updated"] for s in steps] == [True] * 5 + [False] * 7
    # Rule: a run whose measured updates were mostly skipped did not train: it ends
    # diverged (pruned, never the pick), with the counts, whatever its loss says.
    assert run.returncode == Outcome.DIVERGED.exit_code, run.stderr[-2000:]
    assert run.end["outcome"] == "diverged"
    assert run.end["reason"].startswith("7 of 10 measured steps trained nothing (7 updates "
                                        "skipped, 7 for non-finite gradients")
    assert not run.of("summary")


def test_a_production_run_skips_a_loss_spike_and_goes_on(run_trial, tmp_path):
    # The user workload's regression converges to a loss near 0.03, where one batch reads
    # 8x the running median (step 372 here): noise, not a divergence. An exported job that
    # stopped there stopped there again on every resume.
    prod = ("workload.entry=tests.user_workload:make_workload", "workload.name=regression",
            "run.mode=production", "run.steps=400")
    run = run_trial(*prod, tiny=False, cwd=tmp_path / "patient")
    assert run.returncode == 0 and run.end["outcome"] == "ok", run.stderr[-2000:]
    log = run.stdout + run.stderr
    assert "loss spike" in log and "update skipped (1 in a row; 3 end the run)" in log
    # Rule: spikes in a row end it, nonfinite_patience of them: 1 ends it at the first.
    strict = run_trial(*prod, "guard.nonfinite_patience=1", tiny=False, cwd=tmp_path / "strict")
    assert strict.returncode == Outcome.DIVERGED.exit_code, strict.stderr[-2000:]
    reason = strict.end["reason"]
    assert reason.startswith("loss spike") and reason.endswith("update skipped, 1 in a row")
