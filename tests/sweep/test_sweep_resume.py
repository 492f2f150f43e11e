"""Resume: the same command continues the study; a killed orchestrator leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState

from tests.conftest import project_env
from tests.sweep.test_sweep_outcomes import pid_alive


# The cost model's seeds are queued like the neighbours, one at a time when nothing waits:
# with the model seeding from its first fit (gate open), 3 seeds queued at once had kept
# the retry of the orphaned trial queued and unrun once they spent the budget.
@pytest.mark.parametrize("seeds", ["sweep.predict.trust_time_error=0.15",
                                   "sweep.predict.trust_time_error=1"])
def test_kill_9_mid_trial_then_resume(harness, seeds):
    space = harness.space("resume", {"train.micro_batches": [1, 2, 4], "runtime.threads": [2, 1]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.neighbours=true", "sweep.n_trials=3", seeds)]
    slow = {"rules": [], "steps": 6, "step_sleep": 0.4}
    env = project_env(AUTOTUNE_FAKE=json.dumps(slow))
    orchestrator = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
    pid_file = harness.runs / "s" / "trial-0001" / "pid"
    deadline = time.time() + 60
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "trial 1 never started"
    os.kill(orchestrator.pid, signal.SIGKILL)
    orchestrator.wait()
    orphan = int(pid_file.read_text())
    assert pid_alive(orphan)  # the trial outlived its orchestrator (its own session)
    before = harness.study()
    assert before.trials[1].state is TrialState.RUNNING
    assert before.trials[0].state is TrialState.COMPLETE

    fast = {"rules": [], "steps": 6, "step_sleep": 0.01}
    resumed = subprocess.run(argv, env=project_env(AUTOTUNE_FAKE=json.dumps(fast)),
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "reaped 1 trial" in resumed.stdout
    after = harness.study()
    states = [t.state for t in after.trials]
    # Rule: no RUNNING left, no finished trial lost, no orphan alive, budget honoured.
    assert TrialState.RUNNING not in states
    assert after.trials[0].state is TrialState.COMPLETE
    assert after.trials[0].value == before.trials[0].value
    assert not pid_alive(orphan)
    orphaned = after.trials[1]
    assert orphaned.state is TrialState.FAIL and orphaned.user_attrs["reason"] == "orphaned"
    retry = [t for t in after.trials if t.user_attrs.get("role") == "retry"]
    assert len(retry) == 1 and retry[0].params == orphaned.params
    assert retry[0].state is TrialState.COMPLETE
    launched = [t for t in after.trials if t.user_attrs.get("launched")
                and t.user_attrs.get("reason") != "orphaned"]
    assert len(launched) == 3
    # Numbering never restarts: trial numbers are unique and increasing.
    assert [t.number for t in after.trials] == list(range(len(after.trials)))


def test_rerun_with_more_budget_continues_where_it_stopped(harness):
    space = harness.space("more", {"train.micro_batches": [1, 2, 4], "runtime.threads": [2, 1]})
    harness.script()
    code, _, err = harness.run(space, "sweep.n_trials=2")
    assert code == 0, err
    first = [t.params for t in harness.study().trials]
    code, out, err = harness.run(space, "sweep.n_trials=4")
    assert code == 0, err
    trials = harness.study().trials
    # Rule: n_trials is a total, and the earlier trials are kept as they were.
    assert sum(1 for t in trials if t.user_attrs.get("launched")) == 4
    assert [t.params for t in trials[:len(first)]] == first
    assert "resuming study s: 2/4 launched" in out


def test_changed_space_is_refused_unless_allowed(harness):
    harness.script()
    harness.space("a", {"train.micro_batches": [1, 2]})
    harness.space("b", {"train.micro_batches": [1, 2], "runtime.threads": [2, 1]})
    harness.space("c", {"train.micro_batches": [1, 2, 4]})
    code, _, err = harness.run("a", "sweep.n_trials=1")
    assert code == 0, err
    db = harness.runs / "s" / "study.db"
    stamp = db.stat().st_mtime_ns
    code, _, err = harness.run("b", "sweep.n_trials=2")
    assert code == 2
    line = err.strip()
    assert "\n" not in line and "search_space" in line
    assert "sweep.study=NAME" in line and "sweep.allow_changed_space=true" in line
    assert db.stat().st_mtime_ns == stamp  # nothing written
    code, _, err = harness.run("b", "sweep.n_trials=2", "sweep.allow_changed_space=true")
    assert code == 0, err
    assert len(harness.study().trials) >= 2
    # Optuna cannot change a categorical's values inside a study, even when allowed.
    code, _, err = harness.run("c", "sweep.n_trials=3", "sweep.allow_changed_space=true")
    assert code == 2 and "cannot change within a study" in err


def test_optuna_cli_reads_the_study(harness):
    harness.script()
    space = harness.space("cli", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.n_trials=2", study="cli-study")
    assert code == 0, err
    optuna_cli = Path(sys.executable).with_name("optuna")
    url = f"sqlite:///{harness.runs / 'cli-study' / 'study.db'}"
    out = subprocess.run([str(optuna_cli), "studies", "--storage", url, "-f", "json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    studies = json.loads(out.stdout)
    assert [s["name"] for s in studies] == ["cli-study"]
    assert studies[0]["n_trials"] == 2


def test_optuna_dashboard_lists_the_study(harness):
    import socket
    import urllib.request

    harness.script()
    space = harness.space("dash", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.n_trials=2", study="dash-study")
    assert code == 0, err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dashboard = Path(sys.executable).with_name("optuna-dashboard")
    url = f"sqlite:///{harness.runs / 'dash-study' / 'study.db'}"
    server = subprocess.Popen([str(dashboard), url, "--host", "127.0.0.1", "--port", str(port),
                               "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = None
        deadline = time.time() + 30
        while time.time() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies",
                                            timeout=2) as response:
                    body = json.loads(response.read())
            except OSError:
                time.sleep(0.3)
        assert body is not None, "optuna-dashboard did not answer within 30 s"
        names = [s["study_name"] for s in body["study_summaries"]]
        assert names == ["dash-study"]
    finally:
        server.terminate()
        server.wait(timeout=10)


def _processes_of_study(runs: Path) -> list[int]:
    """Pids of trial processes (found by their AUTOTUNE_TRIAL marker) of studies under runs."""
    from trials.contract.launch import MARKER_ENV

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(v.startswith(f"{MARKER_ENV}=".encode()) for v in env) and \
                    f"AUTOTUNE_FAKE_RUNS={runs}".encode() in env:
                found.append(int(entry.name))
    return found


def _stop_mid_trial(harness, argv, env, sig: int, first_trial_file: str,
                    timeout_s: float = 120) -> subprocess.CompletedProcess:
    orchestrator = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
    started = harness.runs / "s" / first_trial_file
    deadline = time.time() + timeout_s
    while not started.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert started.exists(), "the trial never started"
    os.kill(orchestrator.pid, sig)
    out, err = orchestrator.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, orchestrator.returncode, out, err)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_orchestrator_takes_its_trial_down_and_a_rerun_retries_it_first(
        harness, sig, code):
    space = harness.space("stop", {"train.micro_batches": [1, 2, 4]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.neighbours=true", "sweep.n_trials=3")]
    marker_env = {"AUTOTUNE_FAKE_RUNS": str(harness.runs)}
    slow = {"rules": [], "steps": 6, "step_sleep": 5.0}  # trial 0 is still running when stopped
    proc = _stop_mid_trial(harness, argv, project_env(AUTOTUNE_FAKE=json.dumps(slow),
                                                      **marker_env), sig, "trial-0000/pid")
    # Rule: exit 128 + signal, one line saying how to resume, no trial process left behind.
    assert proc.returncode == code, proc.stderr
    assert f"stopped by {signal.Signals(sig).name}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _processes_of_study(harness.runs) == []
    study = harness.study()
    stopped = study.trials[0]
    assert stopped.state is TrialState.FAIL and stopped.user_attrs["reason"] == "interrupted"
    assert [t.state for t in study.trials[1:]] == [TrialState.WAITING]  # queued first
    fast = {"rules": [], "steps": 6, "step_sleep": 0.01}
    resumed = subprocess.run(argv, env=project_env(AUTOTUNE_FAKE=json.dumps(fast)),
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    after = harness.study().trials
    # Rule: the re-run retries the stopped configuration first; it does not count twice.
    assert after[1].params == stopped.params and after[1].user_attrs["role"] == "retry"
    assert after[1].state is TrialState.COMPLETE
    assert sum(1 for t in after if t.user_attrs.get("launched")
               and t.user_attrs.get("reason") != "interrupted") == 3


@pytest.mark.slow
def test_sigterm_kills_every_msrun_worker_of_a_real_trial(harness):
    # A space of one point has nothing to search (refused): 1x1x1 is there, never reached.
    space = harness.space("dp", {"parallel.split": ["2x1x1", "1x1x1"]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "parallel.dp=2", "sweep.n_trials=1",
                               "run.warmup_steps=1", "run.measure_steps=400", fake=False)]
    env = project_env(AUTOTUNE_FAKE_RUNS=str(harness.runs))
    # The metrics file appears once rank 0 has built its model: msrun and both ranks are up.
    proc = _stop_mid_trial(harness, argv, env, signal.SIGTERM, "trial-0000/metrics.jsonl",
                           timeout_s=180)
    assert proc.returncode == 143, proc.stderr
    # Rule: msrun's workers sit in process groups of their own; none of them survives.
    assert _processes_of_study(harness.runs) == []
    assert harness.study().trials[0].user_attrs["reason"] == "interrupted"
