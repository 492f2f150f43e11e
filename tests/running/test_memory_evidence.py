"""A trial that ends without an outcome of its own is ``oom`` only with evidence
(autotune/running/memory_evidence.py): a killed launcher is a crash, said in words."""

from __future__ import annotations

import os
import signal

import pytest

from autotune.running import launcher, monitor
from autotune.running.job import TrialJob
from autotune.running.memory_evidence import KernelOOMKills, unexplained_end
from autotune.running.runner import LocalRunner
from tests.conftest import TINY, project_env
from trials.contract.compose import compose
from trials.contract.events import Phase, StartRecord, StepRecord
from trials.contract.outcomes import Outcome
from trials.contract.schema import to_trial_config
from trials.contract.trial_dir import TrialDir

START = StartRecord(budget_gib=8.0)


def steps_at(peak_gib: float) -> list[StepRecord]:
    return [StepRecord(step=i, phase=Phase.MEASURE, loss=5.0, grad_norm=1.0, step_s=0.1,
                       data_wait_s=0.0, tokens=256, peak_rss_gib=peak_gib) for i in range(3)]


def test_a_kill_without_evidence_is_a_crash_in_words():
    reason, detail = unexplained_end(-9, who="msrun", start=START, steps=steps_at(0.45),
                                     kernel_kills=0, log_tail="")
    assert reason is Outcome.CRASH
    assert detail.startswith("msrun killed by signal 9 (SIGKILL); no sign of running out")
    assert "peak RSS 0.45 of 8 GiB" in detail


@pytest.mark.parametrize("kills, peak, tail, says", [
    (1, 0.45, "", "the kernel's OOM killer fired 1 time(s)"),
    (0, 7.5, "", "at peak RSS 7.50 GiB of its 8 GiB budget"),
    (0, 0.45, "terminate called after throwing an instance of 'std::bad_alloc'",
     "its output says 'bad_alloc'"),
])
def test_each_kind_of_evidence_makes_it_oom(kills, peak, tail, says):
    reason, detail = unexplained_end(-9, who="msrun", start=START, steps=steps_at(peak),
                                     kernel_kills=kills, log_tail=tail)
    assert (reason, says in detail) == (Outcome.OOM, True), detail


def test_a_peak_just_under_the_threshold_is_not_evidence():
    # Rule: near the budget means at least 90 % of it (memory_evidence.NEAR_BUDGET).
    reason, _ = unexplained_end(-6, who="the trial process", start=START,
                                steps=steps_at(0.89 * 8), kernel_kills=0, log_tail="")
    assert reason is Outcome.CRASH


def test_the_kernel_count_is_compared_with_its_value_at_the_start(tmp_path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("pgfault 10\noom_kill 3\n")
    kills = KernelOOMKills.now(vmstat)
    assert kills.since() == 0
    vmstat.write_text("pgfault 12\noom_kill 5\n")
    assert kills.since() == 2
    # Rule: no readable count is no evidence, never an error.
    assert KernelOOMKills.now(tmp_path / "missing").since() == 0


def real_job(tmp_path, name: str, *overrides: str) -> TrialJob:
    cfg = to_trial_config(compose("trial", [*TINY, *overrides]))
    run_dir = TrialDir(tmp_path / name)
    run_dir.write_config(cfg)
    return TrialJob.of(run_dir, f"evidence/{name}")


CLOCKS = monitor.Clocks(wall_s=300, compile_s=200, step_s=60)


@pytest.mark.slow
def test_msrun_killed_by_signal_9_is_a_crash_not_oom(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", project_env()["AUTOTUNE_CACHE"])
    # Long enough to be running when it is killed: 200 measured steps.
    job = real_job(tmp_path, "killed", "parallel.dp=2", "run.measure_steps=200")
    started = {}

    def kill_msrun_once_it_trains(phase: str) -> None:
        if phase not in ("starting", Phase.COMPILE.value) and "killed" not in started:
            started["killed"] = True
            os.kill(started["trial"].process.pgid, signal.SIGKILL)  # msrun alone, from outside

    result = monitor.run(LocalRunner(), job, CLOCKS,
                         hooks=monitor.Hooks(tick=kill_msrun_once_it_trains),
                         on_start=lambda trial: started.update(trial=trial))
    assert started.get("killed"), result.detail
    # Rule: a launcher killed by a signal is a crash with the reason in words, not oom.
    assert result.reason is Outcome.CRASH, result.detail
    assert result.detail.startswith("msrun killed by signal 9 (SIGKILL)"), result.detail
    assert result.exit_code == -9
    # Rule: its workers (process groups of their own) went with it.
    assert launcher.processes_with_marker(started["trial"].marker) == []


@pytest.mark.slow
def test_a_real_oom_is_still_oom(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", project_env()["AUTOTUNE_CACHE"])
    # The address-space cap lifted: the measured-peak guard ends it (a cap can hang MindSpore).
    job = real_job(tmp_path, "oom", "guard.memory_budget_gib=0.25",
                   "guard.address_space_factor=1000")
    result = monitor.run(LocalRunner(), job, CLOCKS)
    assert result.reason is Outcome.OOM, result.detail
