"""Trials left RUNNING by an orchestrator that is gone, and trials it was told to drop.

A RUNNING trial is only taken over when its owner is provably gone (same host,
dead pid), silent past the heartbeat timeout, or never claimed. Taking it over
means: its processes are killed (by the launcher side; this module kills
nothing), the trial is failed with its reason, and its configuration is queued
again so that the next launch retries it first.

Everything here goes through Optuna's public API (user attributes, ``study.tell`` by
trial number, ``enqueue_trial``) but for one read of a trial's storage id (see
:func:`_writable`). Heartbeats are user attributes, not Optuna's storage heartbeat
(``RDBStorage(heartbeat_interval=...)``, ``record_heartbeat``, ``fail_stale_trials``),
because that one cannot keep today's record of a lost trial (checked on optuna 5.0):
``fail_stale_trials`` sets the trial FAIL before its callback runs, and a finished trial
refuses user attributes (``UpdateFinishedTrialError``), so its reason (``orphaned``, which
keeps it out of the launch budget) and its detail could not be written; a trial that
never beat is never stale to it (our "never claimed" case); its last heartbeat has no
public reader; and with it enabled every ``study.ask()`` warns that the heartbeat is
meant for ``study.optimize``.
"""

from __future__ import annotations

import os
import socket
import time

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from autotune.settings import SweepSettings
from autotune.study import notes
from autotune.study.records import DETAIL, HEARTBEAT, REASON, ROLE
from autotune.study.schema.keys import RETRY_OF, RETRY_ROLE
from autotune.study.schema.worker import Worker, stored_worker
from trials.contract.outcomes import Outcome


def worker_identity() -> Worker:
    """Who runs a trial: this host and this orchestrator's pid."""
    return Worker(host=socket.gethostname(), pid=os.getpid())


def beat(trial: optuna.Trial) -> None:
    """The trial's orchestrator is alive: stamp the trial's heartbeat now.

    Called when the trial is asked for, while it waits for a twin, and every
    ``sweep.heartbeat_interval_s`` while it runs; :func:`stale_trials` reads it.
    """
    # The wall clock, unlike every timeout of one process (monotonic): the stamp is stored
    # in the study and compared by another orchestrator, on another host or after a
    # reboot, where this process's monotonic clock means nothing.
    trial.set_user_attr(HEARTBEAT, time.time())


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
    now = time.time()  # against stored wall-clock stamps: heartbeats, trial start times
    stale = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = stored_worker(trial.user_attrs)
        beat = float(trial.user_attrs.get(HEARTBEAT, 0.0) or 0.0)
        same_host = worker is not None and worker.host == me.host
        owner_dead = same_host and worker.pid != me.pid and not _pid_alive(
            int(worker.pid or 0))
        silent = beat and now - beat > settings.heartbeat_timeout_s
        unclaimed = worker is None and trial.datetime_start is not None and (
            now - trial.datetime_start.timestamp() > settings.heartbeat_timeout_s)
        if owner_dead or silent or unclaimed:
            stale.append(trial)
    return stale


def _writable(study: optuna.Study, trial: optuna.Trial | FrozenTrial) -> optuna.Trial:
    """A trial to write user attributes to, also for one this process did not ask for (a
    lost trial of another orchestrator, read back as a FrozenTrial).

    The one private use of this module: Optuna has no public way from a trial number to a
    writable trial (``study.tell`` takes a number; user attributes need a ``Trial``, built
    from the storage's trial id, which a FrozenTrial keeps only as ``_trial_id``).
    Building one runs the sampler's ``before_trial`` hook: a no-op for TPE and random;
    the grid's skips a trial it proposed and a queued one.
    """
    if isinstance(trial, optuna.Trial):
        return trial
    return optuna.trial.Trial(study, trial._trial_id)


def requeue(study: optuna.Study, trial: optuna.Trial | FrozenTrial, outcome: Outcome,
            detail: str, *, attrs: dict | None = None) -> bool:
    """Fail the trial as ``outcome`` and queue its configuration again (first in line).

    False when another worker settled it first.
    """
    # The reason first: a finished trial refuses it, so a trial settled meanwhile keeps
    # its own record.
    try:
        writable = _writable(study, trial)
        writable.set_user_attr(REASON, outcome.value)
        writable.set_user_attr(DETAIL, detail[:500])
    except UpdateFinishedTrialError:
        return False
    try:
        study.tell(trial.number, state=TrialState.FAIL)
    except (ValueError, UpdateFinishedTrialError):
        # Another worker finished it after the reason was written: tell refuses a trial it
        # reads as finished (ValueError), the storage one finished since tell read it.
        return False
    notes.save(writable, notes.outcome_note(outcome, detail))
    if trial.params:
        study.enqueue_trial(trial.params, user_attrs={ROLE: RETRY_ROLE,
                                                      RETRY_OF: trial.number,
                                                      **(attrs or {})},
                            skip_if_exists=False)
    return True


class Heartbeat:
    """A running trial's sign of life, written at most every ``interval_s`` seconds (each
    write is a storage round trip)."""

    def __init__(self, trial: optuna.Trial, interval_s: float) -> None:
        self.trial = trial
        self.interval_s = interval_s
        self.last = time.monotonic()  # this process's own interval: elapsed time

    def maybe_beat(self) -> None:
        if time.monotonic() - self.last >= self.interval_s:
            beat(self.trial)
            self.last = time.monotonic()
