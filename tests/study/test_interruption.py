"""autotune.study.interruption: a trial the sweep stops is failed as interrupted and queued
to run first next time."""

from __future__ import annotations

import signal

import optuna
from optuna.trial import TrialState

from autotune.signals import Stopped
from autotune.study.disk import DiskFull, Reserve
from autotune.study.interruption import interrupt, taken_over
from autotune.study.surviving import Outage


def setup(tmp_path):
    url = "sqlite:///" + str(tmp_path / "s.db")
    study = optuna.create_study(storage=url)
    trial = study.ask()
    trial.suggest_int("x", 1, 8)
    return study, trial, Outage(url, retry_s=1.0)


def test_a_signal_fails_the_trial_as_interrupted_and_requeues_its_configuration(tmp_path):
    study, trial, outage = setup(tmp_path)
    assert interrupt(study, trial, Stopped(signal.SIGTERM), outage=outage,
                     reserve=Reserve(tmp_path), run_dir=None)
    first, queued = study.get_trials(deepcopy=False)
    # Rule: the trial is FAIL, reason interrupted, the signal named in its detail.
    assert first.state is TrialState.FAIL and first.user_attrs["reason"] == "interrupted"
    assert "SIGTERM" in first.user_attrs["detail"]
    # Rule: its configuration is queued again (WAITING) with the same params.
    assert queued.state is TrialState.WAITING
    assert queued.system_attrs["fixed_params"] == first.params == {"x": trial.params["x"]}
    assert queued.user_attrs["retry_of"] == first.number


def test_a_full_disk_gives_up_the_reserve_removes_the_half_written_run(tmp_path):
    study, trial, outage = setup(tmp_path)
    reserve = Reserve(tmp_path)
    reserve.hold()
    run_dir = tmp_path / "trial-0"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("{half")
    cause = DiskFull(tmp_path, free=0)
    assert interrupt(study, trial, cause, outage=outage, reserve=reserve, run_dir=run_dir)
    # Rule: the reserve is released first (room for SQLite), the run directory removed.
    assert not reserve.path.exists() and not run_dir.exists()
    # Rule: what was done is added to the DiskFull's message.
    assert cause.consequences == [f"trial {trial.number} was stopped and re-queued"]


def test_taken_over_only_when_another_worker_failed_it_as_orphaned(tmp_path):
    study, trial, _ = setup(tmp_path)
    # Rule: a trial still running here is not taken over.
    assert taken_over(study, trial) is None
    trial.set_user_attr("reason", "orphaned")
    study.tell(trial, state=TrialState.FAIL)
    # Rule: finished and orphaned: the stored trial is returned.
    assert taken_over(study, trial).number == trial.number
