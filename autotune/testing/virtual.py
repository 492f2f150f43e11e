"""Trials in virtual time: the real follow loop, no process, no waiting.

A :class:`VirtualTrial` is a timeline of records (each at its second since start) and an
exit. It writes each record, when the loop's clock reaches it, to the job's metrics
file through the trial program's own writer, and the loop reads it back through the
same reader as a real trial's (:class:`~autotune.running.job.FollowedFile`). The loop's
waits jump to the next record, so a sweep of scripted trials, stop rules, hangs and
timeouts included, decides as the real one does in a fraction of a second.

- :class:`VirtualRunner`: scripted trials (:mod:`autotune.testing.script`), what the
  tests' sweeps, confirms and profiles run;
- :class:`VirtualSimulator`: the cost model's simulated trials (``sweep.simulate``);
- ``bench.search_efficiency.ReplayRunner``: recorded runs of a landscape, on the same
  :class:`VirtualTrial`.

:func:`virtual_runner` installs the runner for every command this process runs
(:func:`autotune.running.runner.installed`), for studies whose ``sweep.trial_command``
is the scripted trial's.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from omegaconf import OmegaConf

from autotune.plan.simulate import simulated_run
from autotune.running.devices import UNPLACED, Placement
from autotune.running.job import FollowedFile, TrialJob
from autotune.running.runner import installed
from autotune.settings import Launcher, SweepSettings
from autotune.study.reaping import worker_identity
from autotune.study.schema.worker import TrialProcess
from autotune.testing.fake_trial import COMMAND
from autotune.testing.script import plan_run, read_script
from trials.contract.events import Record
from trials.contract.metrics import MetricsLog

#: The exit codes of a process stopped by SIGTERM, killed by SIGKILL.
STOPPED, KILLED = -signal.SIGTERM, -signal.SIGKILL


class VirtualTrial(FollowedFile):
    """A running trial whose clock moves only when the follow loop waits.

    ``events``: (second since start, record); ``exit_s``/``exit_code``: when it exits by
    itself and with what (``exit_code`` None: never, a hang); ``stderr``: what its log
    shows at the end; ``on_end`` hears the seconds it ran once it is cleaned up.
    """

    program = "the trial process"

    def __init__(self, job: TrialJob, events: list[tuple[float, Record]], *, exit_s: float,
                 exit_code: int | None, stderr: str = "", stop_cost_s: float = 0.0,
                 on_end: Callable[[float], None] | None = None) -> None:
        job.prepare()
        super().__init__(job, job.new_marker())
        self.started, self.t = 0.0, 0.0
        self.pending = sorted(events, key=lambda e: e[0])
        self.exit_s, self.exit_code, self.stderr = exit_s, exit_code, stderr
        #: The seconds a stopped trial takes to be gone (its processes' teardown).
        self.stop_cost_s = stop_cost_s
        self.on_end = on_end
        self.log = MetricsLog(job.metrics, append=not job.fresh, run_id=self.marker)

    def _flush(self) -> None:
        """Write what is due by now, as the process would have."""
        while self.pending and self.pending[0][0] <= self.t:
            self.log.emit(self.pending.pop(0)[1])

    def poll(self) -> int | None:
        self._flush()
        if self.exit_code is None or self.t < self.exit_s:
            return None
        return self.exit_code

    def read(self) -> list[Record]:
        self._flush()
        return super().read()

    def now(self) -> float:
        return self.t

    def wait(self, seconds: float) -> None:
        upcoming = [t for t, _ in self.pending if t > self.t]
        if self.exit_code is not None and self.exit_s > self.t:
            upcoming.append(self.exit_s)
        self.t = min([self.t + seconds, *upcoming])

    def _end(self, code: int) -> None:
        """Stopped (or killed) now: gone ``stop_cost_s`` later, unless it exits by itself
        before that; what it writes meanwhile is still read, nothing after."""
        if self.poll() is not None:
            return
        gone = self.t + self.stop_cost_s
        if self.exit_code is None or self.exit_s > gone:
            self.exit_code, self.exit_s = code, gone
        self.pending = [(t, r) for t, r in self.pending if t <= self.exit_s]
        self.t = self.exit_s

    def stop(self, grace_s: float = 2.0) -> None:
        self._end(STOPPED)

    def kill(self) -> None:
        self._end(KILLED)

    def cleanup(self) -> None:
        self.log.close()
        if self.stderr and not self.job.dir.stderr.exists():
            self.job.dir.stderr.write_text(self.stderr + "\n")
        if self.on_end is not None:
            self.on_end(self.t)

    def verdict(self) -> None:
        return None

    def record(self) -> TrialProcess:
        return TrialProcess(host=worker_identity().host, marker=self.marker, virtual=True)


class VirtualRunner:
    """Scripted trials in virtual time: each plays what the scripted process would
    (:func:`autotune.testing.script.plan_run`, the script read from the environment at
    its start, as a process inherits it). ``spent_s``: the virtual seconds of every
    trial it ran; ``started``: the names of the jobs it started, in order."""

    def __init__(self) -> None:
        self.spent_s = 0.0
        self.started: list[str] = []

    def start(self, job: TrialJob, placement: Placement = UNPLACED) -> VirtualTrial:
        self.started.append(job.name)
        plan = plan_run(OmegaConf.load(job.dir.config), read_script(), job.dir.path)
        return VirtualTrial(job, plan.events, exit_s=plan.exit_s, exit_code=plan.exit_code,
                            stderr=plan.stderr, on_end=self._charge)

    def _charge(self, seconds: float) -> None:
        self.spent_s += seconds


class VirtualSimulator(VirtualRunner):
    """``sweep.simulate`` studies in virtual time: the cost model's simulated trial
    (:func:`autotune.plan.simulate.simulated_run`), every record written at once, as its
    process writes them; each run its own noise."""

    def start(self, job: TrialJob, placement: Placement = UNPLACED) -> VirtualTrial:
        self.started.append(job.name)
        records, code = simulated_run(job.dir.config, list(job.overrides),
                                      seed=len(self.started))
        return VirtualTrial(job, [(0.0, r) for r in records], exit_s=0.0, exit_code=code,
                            on_end=self._charge)


def replaces(settings: SweepSettings) -> bool:
    """A local study whose trials are the scripted process: played in virtual time."""
    return (settings.launcher is Launcher.local and not settings.simulate
            and list(settings.trial_command) == COMMAND)


@contextmanager
def virtual_runner(enabled: Callable[[], bool] = lambda: True) -> Iterator[VirtualRunner]:
    """Every command of this process runs its scripted trials on one VirtualRunner, and
    its simulated trials (``sweep.simulate``) on a VirtualSimulator (while ``enabled()``;
    otherwise as processes)."""
    runner, simulator = VirtualRunner(), VirtualSimulator()

    def choose(settings: SweepSettings) -> VirtualRunner | None:
        if not enabled() or settings.launcher is not Launcher.local:
            return None
        return simulator if settings.simulate else runner if replaces(settings) else None

    with installed(choose):
        yield runner

