"""sweep.launcher=slurm against a real one-node SLURM cluster (.ci/slurm-up).

Where SLURM is not installed (and cannot be: not root, not Debian) these tests
skip with the command that brings the cluster up; ``.ci/run`` brings it up and
sets AUTOTUNE_REQUIRE_SLURM=1, so in CI a missing cluster fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from optuna.trial import TrialState

from autotune.running.slurm import job_parameters, slurm_outcome
from autotune.settings import SlurmSettings
from autotune.study.schema.worker import stored_process
from tests.conftest import project_env
from trials.contract.compose import compose
from trials.contract.outcomes import Outcome
from trials.contract.schema import to_trial_config


def slurm_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.fixture(scope="module")
def slurm():
    if not slurm_answers():
        message = ("no SLURM cluster answers here: `sudo bash .ci/slurm-up` installs and starts "
                   "a one-node cluster on this machine (Debian, root), then rerun")
        if os.environ.get("AUTOTUNE_REQUIRE_SLURM") == "1":
            pytest.fail(message)
        pytest.skip(message)


def jobs_of(study) -> list[str]:
    processes = (stored_process(t.user_attrs) for t in study.trials)
    return [str(p.slurm_job) for p in processes if p is not None and p.slurm_job]


def sacct_state(job: str) -> str:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"],
                         capture_output=True, text=True).stdout.split("\n")
    return out[0].strip()


def active_jobs(jobs: list[str]) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    return sorted(set(out.split()) & set(jobs))


# -- without a cluster --------------------------------------------------------------------

@pytest.mark.parametrize("state, outcome, retry", [
    ("OUT_OF_MEMORY", Outcome.OOM, False),
    ("TIMEOUT", Outcome.TIMEOUT, False),
    ("NODE_FAIL", Outcome.CRASH, True),
    ("PREEMPTED", Outcome.CRASH, True),
    ("CANCELLED by 1001", Outcome.CRASH, False),
])
def test_slurm_ends_map_onto_autotune_outcomes(state, outcome, retry):
    got = slurm_outcome(state, cancelled_by_us=False, time_min=30)
    assert got is not None and got[0] is outcome and got[2] is retry
    if state.startswith("CANCELLED"):
        assert "cancelled outside autotune" in got[1] and "1001" in got[1]


def test_our_own_cancel_and_a_normal_end_leave_the_trial_to_speak():
    assert slurm_outcome("CANCELLED by 0", cancelled_by_us=True, time_min=30) is None
    assert slurm_outcome("COMPLETED", cancelled_by_us=False, time_min=30) is None
    assert slurm_outcome("FAILED", cancelled_by_us=False, time_min=30) is None


def test_job_shape_follows_the_trial_devices_and_the_profile():
    cfg = to_trial_config(compose("trial", ["hardware=gpu_a100", "parallel.dp=16"]))
    params = job_parameters(SlurmSettings(partition="gpu", time_min=90, cpus_per_device=4,
                                          extra={"constraint": "a100"}), cfg, "t")
    assert params["nodes"] == 2 and params["ntasks_per_node"] == 1
    assert params["gpus_per_node"] == 8 and params["cpus_per_task"] == 32
    assert params["partition"] == "gpu" and params["time"] == 90
    assert params["additional_parameters"] == {"no-requeue": True, "constraint": "a100"}


def test_unreachable_slurm_is_one_line_and_exit_2(harness, tmp_path, monkeypatch):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for tool in ("sinfo", "sbatch"):
        (fake_bin / tool).write_text("#!/bin/sh\necho 'sinfo: error: Unable to contact slurm "
                                     "controller (connect failure)' >&2\nexit 1\n")
        (fake_bin / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    space = harness.space("s1", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.launcher=slurm")
    assert code == 2 and "Traceback" not in err
    assert "not reachable" in err and "Unable to contact" in err
    assert len(err.strip().splitlines()) <= 2
    assert not harness.runs.exists()


def test_no_slurm_client_is_one_line_and_exit_2(harness, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    space = harness.space("s1", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.launcher=slurm")
    assert code == 2 and "no SLURM client" in err and not harness.runs.exists()


def test_a_job_larger_than_the_profile_is_refused_before_anything_runs(harness):
    space = harness.space("big", {"train.micro_batches": [1, 2]}, devices=4)
    code, _, err = harness.run(space)
    assert code == 2 and "Traceback" not in err
    assert "4 devices" in err and "has 2 devices" in err and "sweep.launcher=slurm" in err
    assert not harness.runs.exists()


# -- with the cluster ---------------------------------------------------------------------

def test_a_partition_that_does_not_exist_is_refused(slurm, harness):
    space = harness.space("s1", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.launcher=slurm", "sweep.slurm.partition=nosuch")
    assert code == 2 and "sweep.slurm.partition='nosuch' does not exist" in err
    assert "debug" in err  # the partitions that do
    assert not harness.runs.exists()


@pytest.mark.slow
def test_a_real_sweep_of_mindspore_trials_through_slurm(slurm, harness):
    space = harness.space("slurm", {"train.micro_batches": [1, 2]})
    code, out, err = harness.run(space, "sweep.launcher=slurm", "sweep.n_trials=2",
                                 "run.measure_steps=3", "run.max_measure_steps=3",
                                 # both run to the end (micro=2 is ~half as fast: slow rule)
                                 "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0",
                                 fake=False)
    assert code == 0, err + out
    study = harness.study()
    done = [t for t in study.trials if t.state is TrialState.COMPLETE]
    assert len(done) == 2 and all(t.value > 0 for t in done)
    jobs = jobs_of(study)
    # A trial that wrote its end record but is slow to exit is cancelled by the monitor
    # after EXIT_GRACE_S (its outcome is known): COMPLETED or CANCELLED, both ours.
    assert len(jobs) == 2
    assert all(sacct_state(j).split()[0] in ("COMPLETED", "CANCELLED") for j in jobs)
    for trial in done:
        start = json.loads((harness.runs / "s" / f"trial-{trial.number:04d}" / "metrics.jsonl")
                           .read_text().splitlines()[0])
        assert start["event"] == "start" and "fake" not in start.get("applied", {})
    for trial in done:
        assert (harness.runs / "s" / f"trial-{trial.number:04d}" / "slurm").is_dir()


def test_scancel_of_a_running_trial_is_a_crash_naming_who(slurm, harness):
    space = harness.space("s1", {"train.micro_batches": [1, 2]})
    harness.script(steps=200, step_sleep=0.1)
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.launcher=slurm", "sweep.n_trials=1")]
    orchestrator = subprocess.Popen(argv, env=project_env(AUTOTUNE_FAKE=os.environ[
        "AUTOTUNE_FAKE"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = harness.runs / "s" / "trial-0000" / "metrics.jsonl"
    deadline = time.time() + 90
    while time.time() < deadline and not (metrics.exists() and "step" in metrics.read_text()):
        time.sleep(0.2)
    job = jobs_of(harness.study())[0]
    subprocess.run(["scancel", job], check=True)
    out, err = orchestrator.communicate(timeout=90)
    assert orchestrator.returncode == 1, err  # the baseline crashed: the sweep stops

    trial = harness.study().trials[0]
    assert trial.state is TrialState.FAIL and trial.user_attrs["reason"] == "crash"
    assert "cancelled outside autotune" in trial.user_attrs["detail"]
    assert sacct_state(job).startswith("CANCELLED")


def test_sigterm_like_preemption_cancels_the_jobs_and_a_rerun_resumes(slurm, harness):
    space = harness.space("s2", {"train.micro_batches": [1, 2, 4, 8]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.launcher=slurm", "sweep.n_trials=3",
                               "sweep.parallel_trials=2", "sweep.sampler=random",
                               "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0")]
    slow = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 200, "step_sleep": 0.1}))
    orchestrator = subprocess.Popen(argv, env=slow, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while time.time() < deadline and not list((harness.runs / "s").glob("trial-*/pid")):
        time.sleep(0.2)
    time.sleep(1.0)
    os.kill(orchestrator.pid, signal.SIGTERM)  # what SLURM sends a job it preempts
    _, err = orchestrator.communicate(timeout=60)
    assert orchestrator.returncode == 143, err
    study = harness.study()
    jobs = jobs_of(study)
    deadline = time.time() + 30  # scancel is asynchronous: SLURM takes KillWait to finish it
    while active_jobs(jobs) and time.time() < deadline:
        time.sleep(0.5)
    assert jobs and not active_jobs(jobs), "a trial's job outlived its orchestrator"
    assert all(sacct_state(j).startswith("CANCELLED") for j in jobs)
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    assert study.trials[0].user_attrs["reason"] == "interrupted"
    fast = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 6, "step_sleep": 0.01}))
    resumed = subprocess.run(argv, env=fast, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    after = harness.study()
    launched = [t for t in after.trials if t.user_attrs.get("launched")
                and t.user_attrs.get("reason") != "interrupted"]
    assert len(launched) == 3 and all(t.state is TrialState.COMPLETE for t in launched)
    assert after.trials[0].params in [t.params for t in launched]  # retried first


def test_a_trial_lost_to_its_node_is_retried_once(slurm, harness, monkeypatch):
    """SLURM's node failure cannot be caused on one node: the job's state is replaced by
    NODE_FAIL for a trial that died without its end record, everything else is real."""
    from autotune.running import slurm as slurm_module

    real = slurm_module.SlurmTrial.verdict

    def lost_node(self):  # the trial's own end record, when it has one, still wins
        return real(self) if self._cancelled_by_us else \
            slurm_outcome("NODE_FAIL", cancelled_by_us=False, time_min=1)

    monkeypatch.setattr(slurm_module.SlurmTrial, "verdict", lost_node)
    space = harness.space("s3", {"train.micro_batches": [1, 2]})
    harness.script([{"when": {"train.micro_batches": 1}, "do": "sigkill_once"}], steps=6)
    code, out, err = harness.run(space, "sweep.launcher=slurm", "sweep.n_trials=1")
    assert code == 0, err + out
    assert "node was lost (NODE_FAIL)" in out and "starting it once more" in out
    trial = harness.study().trials[0]
    assert trial.state is TrialState.COMPLETE
    slurm_dir = harness.runs / "s" / "trial-0000" / "slurm"
    # One trial, started over as a new job in its emptied directory: the retry's files.
    assert len(list(slurm_dir.glob("*_submission.sh"))) == 1


def test_a_trial_lost_twice_is_a_crash(slurm, harness, monkeypatch):
    from autotune.running import slurm as slurm_module

    monkeypatch.setattr(slurm_module.SlurmTrial, "verdict", lambda self: slurm_outcome(
        "NODE_FAIL", cancelled_by_us=False, time_min=1))
    space = harness.space("s3", {"train.micro_batches": [1, 2]})
    harness.script([{"when": {"train.micro_batches": 1}, "do": "sigkill"}], steps=6)
    code, out, err = harness.run(space, "sweep.launcher=slurm", "sweep.n_trials=1")
    trial = harness.study().trials[0]
    assert trial.user_attrs["reason"] == "crash"
    assert "twice: given up" in trial.user_attrs["detail"]
    assert code == 1  # the baseline crashed


def test_a_slurm_sweeps_race_and_confirm_reruns_are_slurm_jobs(slurm, harness, capsys):
    """Every re-measurement of a SLURM study runs where its trials ran: racing's and
    confirm's runs go through the study's runner, each one a SLURM job of its own."""
    from autotune.cli import main

    space = harness.space("s4", {"data.num_workers": [1, 2]})
    harness.script(steps=6, step_sleep=0.01)
    # The fake's tokens/s ignore this knob: the second trial is within noise of the first
    # and races it.
    code, out, err = harness.run(space, "sweep.launcher=slurm", "sweep.n_trials=2",
                                 "sweep.race.rounds=1", "sweep.stop.slow_ratio=0",
                                 "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err + out
    study_dir = harness.runs / "s"
    races = sorted(study_dir.glob("trial-*/race-*"))
    # Rule: a race re-run in a SLURM sweep is a SLURM job (its submission script is there).
    assert races and all(list((r / "slurm").glob("*_submission.sh")) for r in races)
    code = main(["confirm", *harness.overrides(space, "sweep.launcher=slurm"),
                 "confirm.top_k=1", "confirm.repeats=1"])
    out = capsys.readouterr()
    assert code == 0, out.err + out.out
    runs = sorted((study_dir / "confirm").glob("trial-*-run-0"))
    # Rule: confirm's runs of a SLURM study are SLURM jobs, named after what they re-run.
    assert runs and all(list((r / "slurm").glob("*_submission.sh")) for r in runs)
    names = subprocess.run(["sacct", "-n", "-X", "-P", "-S", "now-1hours", "-o", "JobName"],
                           capture_output=True, text=True).stdout.split()
    assert "autotune-confirm-0" in names
    assert harness.study().user_attrs["autotune.repeats"]["0"][-1]["source"] == "confirm"
