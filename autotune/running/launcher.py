"""Start a trial as its own process group in its own directory; kill the whole group.

The argv and environment come from the one launch recipe
(:mod:`trials.contract.launch`). Every process carries ``AUTOTUNE_TRIAL=<marker>``
in its environment, so an orchestrator that restarts after a crash, or is told to
stop, finds and kills exactly its trial's processes, msrun workers included
(they sit in process groups of their own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from autotune.running.devices import UNPLACED, Placement
from trials.contract.launch import MARKER_ENV, trial_argv, trial_env
from trials.contract.outcomes import Outcome


@dataclass
class TrialProcess:
    """A trial running as local processes. The monitor follows any launcher's trial
    through the same methods (:class:`autotune.running.slurm.SlurmTrial` is the other)."""

    popen: subprocess.Popen
    pgid: int
    marker: str
    #: When it began to run (the stop rules' clocks start here); None while queued.
    started: float | None

    def poll(self) -> int | None:
        return self.popen.poll()

    def stop(self, grace_s: float = 2.0) -> None:
        stop(self, grace_s)

    def cleanup(self) -> None:
        """After the end: kill what it left behind (dataset workers, msrun ranks)."""
        kill_marked(self.marker)

    def verdict(self) -> tuple[Outcome, str, bool] | None:
        """The launcher's own word on how it ended (outcome, detail, worth a retry);
        None: a local process says it all through its end record and exit code."""
        return None

    def record(self) -> dict:
        """What the study keeps to find and kill it later (the reaper)."""
        from autotune.study.reaping import worker_identity

        return {"host": worker_identity()["host"], "pgid": self.pgid, "marker": self.marker}


def start(argv: list[str], trial_dir: Path, marker: str, *,
          placement: Placement = UNPLACED) -> TrialProcess:
    """Launch in a new session (its own process group), output to files in trial_dir;
    ``placement`` restricts it to its devices and cores (concurrent trials)."""
    with open(trial_dir / "stdout.log", "ab") as out, open(trial_dir / "stderr.log", "ab") as err:
        popen = subprocess.Popen([*placement.argv_prefix(), *argv], cwd=trial_dir, stdout=out,
                                 stderr=err, stdin=subprocess.DEVNULL,
                                 env={**trial_env(os.environ, marker=marker), **placement.env},
                                 start_new_session=True)
    return TrialProcess(popen=popen, pgid=popen.pid, marker=marker, started=time.time())


def start_trial(config_path: Path, trial_dir: Path, marker: str, *, world_size: int,
                trial_command: list[str], placement: Placement = UNPLACED) -> TrialProcess:
    """The sweep's launch of one trial on this machine (the local launcher)."""
    argv = trial_argv(config_path, world_size=world_size, trial_command=trial_command,
                      log_dir=trial_dir / "msrun_log")
    return start(argv, trial_dir, marker, placement=placement)


def kill_group(pgid: int, grace_s: float = 2.0, *, leader: subprocess.Popen | None = None
               ) -> None:
    """SIGTERM the group, then SIGKILL what is left.

    ``leader`` (our own child) is reaped while waiting: an exited but unreaped leader
    would keep the group alive and cost the whole grace period.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.time() + grace_s
        while time.time() < deadline:
            if leader is not None:
                leader.poll()
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)


def processes_with_marker(marker: str) -> list[int]:
    """Pids whose environment carries this trial's marker (orphans after a crash)."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal_groups(groups: set[int], sig: int) -> set[int]:
    """Send ``sig`` to each group; the groups that still exist."""
    alive = set()
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
            alive.add(pgid)
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def kill_marked(marker: str, grace_s: float = 1.0) -> int:
    """Kill every process of a trial, found by its marker; how many there were.

    msrun starts each worker in a process group of its own: every group gets SIGTERM at
    once, one shared grace period, then SIGKILL (one group after the other took 3 s)."""
    pids = processes_with_marker(marker)
    groups = set()
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        groups = _signal_groups(groups, sig)
        deadline = time.time() + grace_s
        while groups and time.time() < deadline:
            groups = _signal_groups(groups, 0)
            time.sleep(0.05)
    for pid in processes_with_marker(marker):  # a process that left its group
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def stop(proc: TrialProcess, grace_s: float = 2.0) -> None:
    """Kill the trial's process group and anything else carrying its marker; reap it.
    ``grace_s``: how long SIGTERM may take before SIGKILL."""
    kill_group(proc.pgid, grace_s, leader=proc.popen)
    kill_marked(proc.marker, grace_s)
    try:
        proc.popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def kill_recorded(process: dict | None, host: str) -> int:
    """Kill what a study recorded of a trial's processes (``{"host", "pgid", "marker"}``),
    when they run on this host, and cancel its SLURM job (``slurm_job``) wherever it runs;
    how many processes (or jobs) there were."""
    if not process:
        return 0
    killed = 0
    if process.get("slurm_job"):
        from autotune.running.slurm import cancel_job

        killed += cancel_job(str(process["slurm_job"]))
    if process.get("host") == host and process.get("marker"):
        killed += kill_marked(process["marker"])
    return killed


def trial_command(simulate: bool, configured: list[str]) -> list[str]:
    """The program that runs a trial: the simulated one (``sweep.simulate``), the
    configured ``sweep.trial_command``, or (empty) the MindSpore trial program."""
    if simulate:
        return [sys.executable, "-m", "autotune.plan.simulate"]
    return list(configured)
