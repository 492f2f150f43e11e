"""A running trial that the sweep stops for a reason of its own (a signal, a full disk) is
failed as ``interrupted`` and its configuration queued to run first next time: as far as
the storage allows, never for longer than a stopping command should take.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from autotune.signals import Stopped
from autotune.study import reaping
from autotune.study.disk import DiskFull, Reserve
from autotune.study.records import REASON
from autotune.study.surviving import Outage, StorageLost
from trials.contract.outcomes import Outcome

#: How long a stopping sweep waits for a lost storage to record the interruption.
PATIENCE_S = 5.0


def interrupt(study: optuna.Study, trial: optuna.Trial, cause: Stopped | DiskFull, *,
              outage: Outage, reserve: Reserve, run_dir: Path | None) -> bool:
    """Fail ``trial`` as interrupted by ``cause`` and re-queue it; False when the storage
    could not record it (the next run's reaper then re-queues it as orphaned).

    On a full disk the reserve is given up first, so that SQLite has room to write, and the
    trial's directory (its records cut off mid-write) is removed; what happened is added to
    the DiskFull's message.
    """
    if isinstance(cause, DiskFull):
        reserve.release()
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
        detail = (f"the disk under {cause.where} was full; every process of the trial was "
                  "killed, its half-written directory removed and its configuration re-queued")
    else:
        detail = (f"the orchestrator received {cause.name}; every process of the trial was "
                  "killed and its configuration re-queued")
    try:
        with outage.patience(PATIENCE_S):
            reaping.requeue(study, trial, Outcome.INTERRUPTED, detail)
        recorded = True
    except (StorageLost, DiskFull):
        recorded = False
    if isinstance(cause, DiskFull):
        cause.consequences.append(
            f"trial {trial.number} was stopped and re-queued" if recorded else
            f"trial {trial.number} was stopped; the study could not record it, so the next "
            "run re-queues it")
    return recorded


def taken_over(study: optuna.Study, trial: optuna.Trial) -> FrozenTrial | None:
    """The trial as stored, when another worker took it over (failed it as orphaned: this
    orchestrator was silent past ``sweep.heartbeat_timeout_s``, e.g. stopped); else None."""
    stored = study.get_trials(deepcopy=False)[trial.number]
    orphaned = stored.user_attrs.get(REASON) == Outcome.ORPHANED.value
    return stored if stored.state.is_finished() and orphaned else None
