"""Who runs a trial and where its processes are: what the reaper reads (``worker``,
``process``) to take over a trial whose orchestrator is gone (autotune/study/reaping.py,
autotune/running/runner.py)."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.study.schema import keys
from autotune.study.schema.blob import Blob


@dataclass
class Worker(Blob):
    """The orchestrator that runs a trial: its host and pid."""

    host: str = ""
    pid: int = 0


@dataclass
class TrialProcess(Blob):
    """What the study keeps of a trial's processes, to find and kill them later."""

    host: str = ""
    marker: str = ""  # in the environment of every process of the launch
    pgid: int | None = None  # a local process group
    slurm_job: str | None = None  # a SLURM job, cancelled from any host
    virtual: bool = False  # played in virtual time (autotune/testing/virtual.py)


def stored_worker(attrs: dict) -> Worker | None:
    """A trial's worker from its user attributes; None when no worker claimed it."""
    stored = attrs.get(keys.WORKER)
    return Worker.from_json(stored) if stored else None


def stored_process(attrs: dict) -> TrialProcess | None:
    """A trial's processes from its user attributes; None before it launched."""
    stored = attrs.get(keys.PROCESS)
    return TrialProcess.from_json(stored) if stored else None
