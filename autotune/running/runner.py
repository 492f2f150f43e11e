"""How a trial runs: one small interface, one implementation per place it runs.

Everything that runs a trial (the sweep, racing, ``confirm``, ``profile``, the
correctness stage, ``soak``, the search benchmark) builds a :class:`TrialJob` and
hands it to a :class:`Runner`; the one follow loop (:func:`autotune.running.monitor.watch`)
follows what ``start`` returns, whatever started it. (The benchmarks that measure the
trial program itself start it bare, through the same launch recipe,
``trials.contract.launch``: no orchestrator sits between them and the process.)

- :class:`LocalRunner`: a process group of its own on this machine (``launcher``);
- :class:`SimulatedRunner`: the same, running the cost model's simulated trial
  (``sweep.simulate``);
- :class:`~autotune.running.slurm.SlurmRunner`: a SLURM job (``sweep.launcher=slurm``);
- :class:`~autotune.testing.virtual.VirtualRunner`: a scripted trial (the tests') or a
  recorded run (``bench.search_efficiency``) played in virtual time, installed for a
  process with :func:`installed`.

Callers never branch on which one they hold: :func:`runner_for` picks it once from
the settings.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autotune.running import launcher
from autotune.running.devices import UNPLACED, Placement
from autotune.running.job import FollowedFile, Runner, TrialJob
from autotune.running.slurm import SlurmRunner, cancel_job, check_cluster
from autotune.settings import Launcher, SweepSettings
from autotune.study import reaping
from autotune.study.layout import StudyLayout
from autotune.study.reaping import worker_identity
from autotune.study.schema.worker import TrialProcess, stored_process
from trials.contract.outcomes import Outcome

log = logging.getLogger(__name__)

#: The program a simulated trial runs (the cost model's prediction as a metrics file).
SIMULATOR = [sys.executable, "-m", "autotune.plan.simulate"]


class LocalTrial(FollowedFile):
    """A trial running as a process group of its own on this machine."""

    def __init__(self, job: TrialJob, process: launcher.Process, program: str) -> None:
        super().__init__(job, process.marker)
        self.process = process
        self.started: float | None = process.started
        self.program = program

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self, grace_s: float = 2.0) -> None:
        launcher.stop(self.process, grace_s)

    def kill(self) -> None:
        launcher.kill9(self.process)

    def cleanup(self) -> None:
        """After the end: kill what it left behind (dataset workers, msrun ranks)."""
        launcher.kill_marked(self.marker)

    def verdict(self) -> tuple[Outcome, str, bool] | None:
        """A local process says it all through its end record and exit code."""
        return None

    def record(self) -> TrialProcess:
        """What the study keeps to find and kill it later (the reaper)."""
        return TrialProcess(host=worker_identity().host, pgid=self.process.pgid,
                            marker=self.marker)


class LocalRunner:
    """Trials as process groups on this machine; ``program`` replaces the MindSpore trial
    program (``sweep.trial_command``: a user's own, or the tests' scripted fake)."""

    def __init__(self, program: list[str] | tuple[str, ...] = ()) -> None:
        self.program = list(program)

    def start(self, job: TrialJob, placement: Placement = UNPLACED) -> LocalTrial:
        job.prepare()
        argv = job.argv(self.program)
        process = launcher.start(argv, job.dir.path, job.new_marker(), placement=placement)
        return LocalTrial(job, process, "msrun" if Path(argv[0]).name == "msrun"
                          else "the trial process")


class SimulatedRunner(LocalRunner):
    """The cost model's simulated trial (``sweep.simulate``): a prediction, run as a trial."""

    def __init__(self) -> None:
        super().__init__(SIMULATOR)


def program_for(settings: SweepSettings) -> list[str]:
    """The program a trial runs: the simulator, ``sweep.trial_command``, or (empty) the
    MindSpore trial program."""
    return list(SIMULATOR) if settings.simulate else list(settings.trial_command)


#: A runner that replaces the one the settings choose, for every command run in this
#: process: ``autotune.testing`` installs its virtual-time runner here (:func:`installed`).
#: It returns None for the settings it does not replace.
_installed: Callable[[SweepSettings], Runner | None] | None = None


@contextmanager
def installed(factory: Callable[[SweepSettings], Runner | None]) -> Iterator[None]:
    """While inside, ``runner_for`` asks ``factory`` first."""
    global _installed
    before, _installed = _installed, factory
    try:
        yield
    finally:
        _installed = before


def runner_for(settings: SweepSettings) -> Runner:
    """The runner the settings ask for (SLURM: the cluster is checked first, ConfigError
    naming the fix when it does not answer). First, what a command on this study left
    running when it died is killed: nothing measures beside it."""
    if killed := launcher.kill_orphans_under(StudyLayout.of(settings).root):
        log.warning("killed %d process(es) that a command on study %s left running when it "
                    "died: they would have run beside this command's", killed, settings.study)
    if _installed is not None and (replaced := _installed(settings)) is not None:
        return replaced
    if settings.launcher is Launcher.slurm:
        check_cluster(settings.slurm)
        return SlurmRunner(settings.slurm, settings.study, program_for(settings))
    if settings.simulate:
        return SimulatedRunner()
    return LocalRunner(settings.trial_command)


def kill_recorded(process: TrialProcess | None, host: str) -> int:
    """Kill what a study recorded of a trial's processes, when they run on this host, and
    cancel its SLURM job wherever it runs; how many processes (or jobs) there were."""
    if process is None:
        return 0
    killed = 0
    if process.slurm_job:
        killed += cancel_job(str(process.slurm_job))
    if process.host == host and process.marker:
        killed += launcher.kill_marked(process.marker)
    return killed


def reap_lost(study, settings: SweepSettings) -> list[int]:
    """Trials whose orchestrator is gone (:func:`autotune.study.reaping.stale_trials`): their
    processes are killed here (their SLURM jobs cancelled), their configurations re-queued;
    the numbers of the trials taken over."""
    host = worker_identity().host
    reaped = []
    for trial in reaping.stale_trials(study, settings):
        killed = kill_recorded(stored_process(trial.user_attrs), host)
        detail = f"orchestrator gone; {killed} orphan process(es) killed; configuration re-queued"
        if reaping.requeue(study, trial, Outcome.ORPHANED, detail):
            reaped.append(trial.number)
    return reaped
