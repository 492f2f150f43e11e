"""Start a trial as its own process group in its own directory; kill the whole group.

The argv and environment come from the one launch recipe
(:mod:`trials.contract.launch`). Every process carries ``AUTOTUNE_TRIAL=<marker>``
in its environment, so an orchestrator that restarts after a crash, or is told to
stop, finds and kills exactly its trial's processes, msrun workers included
(they sit in process groups of their own). It also carries ``AUTOTUNE_OWNER``, the
command that started it (pid and start time): a process whose owner is gone, under a
study's directory, is an orphan the next command there kills before it measures
(:func:`kill_orphans_under`), whatever killed its owner (``kill -9`` included).
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
from trials.contract.launch import MARKER_ENV, trial_env
from trials.contract.trial_dir import TrialDir


@dataclass
class Process:
    """A process group started here: its leader, the group id, the marker every process
    of it carries, when it started (``time.monotonic()``: its timeouts are elapsed time,
    which a step of the wall clock must not change)."""

    popen: subprocess.Popen
    pgid: int
    marker: str
    started: float

    def poll(self) -> int | None:
        return self.popen.poll()


#: The command that started a trial: ``<pid>:<start time in clock ticks>`` (a pid alone
#: may be reused).
OWNER_ENV = "AUTOTUNE_OWNER"


def _started_ticks(pid: int | str) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_started_ticks(pid)}"


def _owner_alive(owner: str) -> bool:
    pid, _, ticks = owner.partition(":")
    return pid.isdigit() and _started_ticks(pid) == ticks


def start(argv: list[str], run_dir: Path, marker: str, *,
          placement: Placement = UNPLACED) -> Process:
    """Launch in a new session (its own process group), output to the run directory's
    log files; ``placement`` restricts it to its devices and cores (concurrent trials)."""
    logs = TrialDir(run_dir)
    env = {**trial_env(os.environ, marker=marker), **placement.env, OWNER_ENV: owner_id()}
    with open(logs.stdout, "ab") as out, open(logs.stderr, "ab") as err:
        def popen(command: list[str]) -> subprocess.Popen:
            return subprocess.Popen(command, cwd=run_dir, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env=env, start_new_session=True)

        try:
            process = popen([*placement.argv_prefix(), *argv])
        except OSError as exc:
            # A program that cannot be started (not an executable, a bad interpreter line)
            # is a trial that failed, with why in its log, not an exception that ends the
            # sweep and leaves the trial RUNNING: a stand-in exits as a crash would.
            err.write(f"cannot start {argv[0]}: {exc}\n".encode())
            err.flush()
            process = popen([sys.executable, "-c", "raise SystemExit(127)"])
    return Process(popen=process, pgid=process.pid, marker=marker, started=time.monotonic())


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
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
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
        deadline = time.monotonic() + grace_s
        while groups and time.monotonic() < deadline:
            groups = _signal_groups(groups, 0)
            time.sleep(0.05)
    for pid in processes_with_marker(marker):  # a process that left its group
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def _environ(pid: str) -> dict[bytes, bytes]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.partition(b"=")[::2] for item in raw.split(b"\0") if item)


def orphans_under(root: Path) -> list[int]:
    """Trial processes (they carry a marker) working under ``root`` whose owner, the
    command that started them, is gone."""
    root = Path(os.path.realpath(root))
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        env = _environ(entry.name)
        owner = env.get(OWNER_ENV.encode(), b"").decode()
        if MARKER_ENV.encode() not in env or not owner or _owner_alive(owner):
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            found.append(int(entry.name))
    return found


def kill_orphans_under(root: Path, grace_s: float = 1.0) -> int:
    """Kill every orphan under ``root`` with its process group; how many there were."""
    pids = orphans_under(root)
    groups = set()
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        groups = _signal_groups(groups, sig)
        deadline = time.monotonic() + grace_s
        while groups and time.monotonic() < deadline:
            groups = _signal_groups(groups, 0)
            time.sleep(0.05)
    for pid in orphans_under(root):  # one that left its group
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


# -- processes that escaped their trial ------------------------------------------------------
#: prctl(2) option: orphans among this process's descendants are re-parented to it.
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt this command's orphaned descendants (Linux): a trial's child that left its
    process group and dropped its marker then becomes our child instead of init's, and
    :func:`kill_adopted` finds it. False where the kernel does not offer it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            found.append(int(entry.name))
    return found


def kill_adopted() -> int:
    """At the end of a command: every process still our child (its own children were all
    waited for, so these are adopted orphans) is killed with its group; how many."""
    me, mine = os.getpid(), os.getpgrp()
    pids = _children_of(me)
    for pid in pids:
        try:
            group = os.getpgid(pid)
            if group != mine:
                os.killpg(group, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    return len(pids)


def stop(process: Process, grace_s: float = 2.0) -> None:
    """Kill the process group and anything else carrying its marker; reap the leader.
    ``grace_s``: how long SIGTERM may take before SIGKILL."""
    kill_group(process.pgid, grace_s, leader=process.popen)
    kill_marked(process.marker, grace_s)
    try:
        process.popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def kill9(process: Process) -> None:
    """SIGKILL every process at once, as a crashed node would: the process group, then
    what carries its marker (msrun's workers sit in process groups of their own)."""
    try:
        os.killpg(process.pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in processes_with_marker(process.marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        process.popen.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    kill_marked(process.marker)
