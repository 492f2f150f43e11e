"""Trials left RUNNING by an orchestrator that is gone, and trials it was told to drop.

A RUNNING trial is only taken over when its owner is provably gone (same host,
dead pid), silent past the heartbeat timeout, or never claimed. Taking it over
means: its processes are killed (by the launcher side; this module kills
nothing), the trial is failed with its reason, and its configuration is queued
again so that the next launch retries it first.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from autotune.settings import SweepSettings
from autotune.study.records import DETAIL, HEARTBEAT, REASON, ROLE, WORKER
from trials.contract.outcomes import Outcome

RETRY_ROLE = "retry"


def worker_identity() -> dict[str, Any]:
    """Who runs a trial: this host and this orchestrator's pid."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_trials(study: optuna.Study, settings: SweepSettings) -> list[FrozenTrial]:
    """RUNNING trials whose orchestrator is gone."""
    me = worker_identity()
    now = time.time()
    stale = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER) or {}
        beat = float(trial.user_attrs.get(HEARTBEAT, 0.0) or 0.0)
        same_host = worker.get("host") == me["host"]
        owner_dead = same_host and worker.get("pid") != me["pid"] and not _pid_alive(
            int(worker.get("pid", 0) or 0))
        silent = beat and now - beat > settings.heartbeat_timeout_s
        unclaimed = not worker and trial.datetime_start is not None and (
            now - trial.datetime_start.timestamp() > settings.heartbeat_timeout_s)
        if owner_dead or silent or unclaimed:
            stale.append(trial)
    return stale


def requeue(study: optuna.Study, trial: FrozenTrial, outcome: Outcome, detail: str) -> bool:
    """Fail the trial as ``outcome`` and queue its configuration again (first in line).

    False when another worker settled it first.
    """
    storage = study._storage
    try:
        storage.set_trial_user_attr(trial._trial_id, REASON, outcome.value)
        storage.set_trial_user_attr(trial._trial_id, DETAIL, detail[:500])
        storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    except UpdateFinishedTrialError:
        return False
    if trial.params:
        study.enqueue_trial(trial.params, user_attrs={ROLE: RETRY_ROLE,
                                                      "retry_of": trial.number},
                            skip_if_exists=False)
    return True


class Heartbeat:
    """A running trial's sign of life, written at most every ``interval_s`` seconds (each
    write is a storage round trip)."""

    def __init__(self, trial: optuna.Trial, interval_s: float) -> None:
        self.trial = trial
        self.interval_s = interval_s
        self.last = time.time()

    def maybe_beat(self) -> None:
        if time.time() - self.last >= self.interval_s:
            self.trial.set_user_attr(HEARTBEAT, time.time())
            self.last = time.time()
