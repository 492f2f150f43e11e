"""What a runner runs and what it hands back: the job, the running trial, the runner.

The interface of :mod:`autotune.running.runner` (where the implementations are
chosen) in a module of its own, so that every implementation (local, SLURM,
replayed) imports it without importing the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from autotune.running.devices import UNPLACED, Placement
from autotune.study.schema.worker import TrialProcess
from trials.contract.events import Record
from trials.contract.launch import trial_argv
from trials.contract.metrics import MetricsReader
from trials.contract.outcomes import Outcome
from trials.contract.schema import TrialConfig
from trials.contract.trial_dir import TrialDir


@dataclass(frozen=True)
class TrialJob:
    """One run of one configuration: the resolved config in its run directory, plus
    overrides for this run only (a profile's steps, a soak's production settings)."""

    dir: TrialDir
    #: The configuration as this run sees it (overrides applied): world size, metrics path.
    cfg: TrialConfig
    #: Names the run's processes (its marker) and its SLURM job: ``study/3``, ``confirm/3``.
    name: str
    overrides: tuple[str, ...] = ()
    #: False for a run that continues an earlier one in its directory (a soak's resume:
    #: its checkpoints, its metrics file); True empties the directory first.
    fresh: bool = True

    @classmethod
    def of(cls, run_dir: TrialDir | Path, name: str, overrides: tuple[str, ...] = (), *,
           fresh: bool = True) -> TrialJob:
        """The job of the ``config.yaml`` already written in ``run_dir``."""
        run_dir = run_dir if isinstance(run_dir, TrialDir) else TrialDir(run_dir)
        return cls(run_dir, run_dir.read_config(overrides), name, tuple(overrides), fresh)

    @property
    def world_size(self) -> int:
        return self.cfg.parallel.devices

    @property
    def metrics(self) -> Path:
        return self.dir.metrics(self.cfg)

    def argv(self, program: list[str]) -> list[str]:
        """The one launch recipe for this job on this machine (``program`` empty: the
        MindSpore trial program)."""
        return trial_argv(self.dir.config, world_size=self.world_size, trial_command=program,
                          log_dir=self.dir.msrun_log, overrides=self.overrides)

    def new_marker(self) -> str:
        """The marker of one launch, new each time: also its run id, which every record
        it writes carries (trials/contract/launch.py)."""
        return f"{self.name}/{time.time_ns()}"

    def prepare(self) -> None:
        """Before a process starts: a fresh run's directory holds only its config, so
        nothing an earlier run left there is read or shown as this run's."""
        if self.fresh:
            self.dir.clear()
        else:
            self.dir.create()


class RunningTrial(Protocol):
    """A started trial as the follow loop sees it, whatever started it."""

    marker: str
    #: When it began to run, by :meth:`now`'s clock (the stop rules' clocks start here);
    #: None while queued.
    started: float | None
    #: What was started, in words ("msrun", "the trial process"), for how it ended.
    program: str

    def poll(self) -> int | None: ...
    def read(self) -> list[Record]: ...
    def stop(self, grace_s: float = 2.0) -> None: ...
    def kill(self) -> None: ...
    def cleanup(self) -> None: ...
    def verdict(self) -> tuple[Outcome, str, bool] | None: ...
    def record(self) -> TrialProcess: ...
    def log_tail(self) -> str: ...
    #: The clock of every stop rule (seconds; only differences mean anything).
    def now(self) -> float: ...
    def wait(self, seconds: float) -> None: ...


class Runner(Protocol):
    def start(self, job: TrialJob, placement: Placement = UNPLACED) -> RunningTrial: ...


class FollowedFile:
    """What a real trial shares however it was started: its records come from the metrics
    file it writes (only the lines of this launch, by its run id), time is the monotonic clock:
    a step of the wall clock (NTP, ``date -s``) must not kill a healthy trial as hung."""

    program = "the trial process"

    def __init__(self, job: TrialJob, marker: str) -> None:
        self.job = job
        self.marker = marker
        # A continued file is read from its end: the earlier launches' lines are not ours.
        self.reader = MetricsReader(job.metrics, run_id=marker, from_end=not job.fresh)

    def read(self) -> list[Record]:
        return self.reader.read_new()

    def log_tail(self) -> str:
        return self.job.dir.log_tail()

    def now(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)
