"""Lost trials taken over through Optuna's public API, by a second worker on one study."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import optuna
import pytest
from optuna.trial import TrialState

from autotune.settings import SweepSettings
from autotune.study import reaping
from autotune.study import records as R
from autotune.study.schema.worker import Worker
from trials.contract.outcomes import Outcome

SPACE = {"x": optuna.distributions.CategoricalDistribution([1, 2, 3])}


@pytest.fixture
def workers(tmp_path):
    """Two orchestrators' views of one SQLite study: (the one that dies, the one that reaps)."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    first = optuna.create_study(study_name="s", storage=url, direction="maximize")
    return first, optuna.load_study(study_name="s", storage=url)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def claimed(study: optuna.Study, host: str, pid: int) -> optuna.Trial:
    trial = study.ask(SPACE)
    trial.set_user_attr(R.WORKER, Worker(host=host, pid=pid).to_json())
    reaping.beat(trial)
    return trial


def test_a_dead_owners_trial_is_failed_as_orphaned_and_queued_again_once(workers):
    gone, reaper = workers
    lost = claimed(gone, socket.gethostname(), dead_pid())
    (stale,) = reaping.stale_trials(reaper, SweepSettings())
    assert stale.number == lost.number
    # Rule: the reaper fails it with its reason and detail and queues its configuration.
    assert reaping.requeue(reaper, stale, Outcome.ORPHANED, "orchestrator gone") is True
    failed, retry = reaper.get_trials()
    assert failed.state is TrialState.FAIL
    assert (failed.user_attrs[R.REASON], failed.user_attrs[R.DETAIL]) == ("orphaned",
                                                                         "orchestrator gone")
    assert retry.state is TrialState.WAITING
    assert (retry.user_attrs[R.ROLE], retry.user_attrs["retry_of"]) == ("retry", lost.number)
    # Rule: a trial already settled is not taken over again (told FAIL once, queued once):
    # not from the stale snapshot the reaper read...
    assert reaping.requeue(reaper, stale, Outcome.ORPHANED, "again") is False
    # ...nor by its first owner coming back with its live trial.
    assert reaping.requeue(gone, lost, Outcome.INTERRUPTED, "too late") is False
    assert reaper.trials[0].user_attrs[R.DETAIL] == "orchestrator gone"
    assert len(reaper.trials) == 2
    # Rule: the retry is the next proposal, with the lost trial's configuration.
    assert reaper.ask(SPACE).params == failed.params


def test_a_silent_trial_is_stale_and_a_beat_keeps_it_alive(workers):
    owner, reaper = workers
    trial = claimed(owner, "another-host", 1)  # a pid no reaper here can judge
    settings = SweepSettings(heartbeat_interval_s=0.01, heartbeat_timeout_s=0.2)
    # Rule: a live owner elsewhere is judged by its heartbeat only.
    assert reaping.stale_trials(reaper, settings) == []
    time.sleep(0.3)
    assert [t.number for t in reaping.stale_trials(reaper, settings)] == [trial.number]
    reaping.beat(trial)
    assert reaping.stale_trials(reaper, settings) == []


def test_a_never_claimed_trial_is_stale_only_past_the_timeout(workers):
    owner, reaper = workers
    trial = owner.ask(SPACE)  # its orchestrator died before it could claim it
    assert reaping.stale_trials(reaper, SweepSettings(heartbeat_timeout_s=60)) == []
    time.sleep(0.3)
    stale = reaping.stale_trials(reaper, SweepSettings(heartbeat_timeout_s=0.2))
    assert [t.number for t in stale] == [trial.number]
