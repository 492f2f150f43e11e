"""Start a trial as its own process group in its own directory; kill the whole group.

dp > 1 goes through ``msrun`` (one process per rank, mccl on the CPU). Every
process carries ``AUTOTUNE_TRIAL=<marker>`` in its environment, so an
orchestrator that restarts after a crash can find and kill exactly its orphans.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MARKER_ENV = "AUTOTUNE_TRIAL"


@dataclass
class TrialProcess:
    popen: subprocess.Popen
    pgid: int
    marker: str
    started: float

    def poll(self) -> int | None:
        return self.popen.poll()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trial_argv(config_path: Path, world_size: int, trial_command: list[str],
               trial_dir: Path) -> list[str]:
    if trial_command:
        return [*trial_command, "--config", str(config_path)]
    if world_size == 1:
        return [sys.executable, "-m", "trials.train", "--config", str(config_path)]
    msrun = Path(sys.executable).with_name("msrun")
    return [str(msrun), f"--worker_num={world_size}", f"--local_worker_num={world_size}",
            "--master_addr=127.0.0.1", f"--master_port={free_port()}", "--join=True",
            f"--log_dir={trial_dir / 'msrun_log'}", str(PROJECT_ROOT / "trials" / "train.py"),
            "--config", str(config_path)]


def trial_env(marker: str) -> dict[str, str]:
    env = dict(os.environ)
    env[MARKER_ENV] = marker
    env.setdefault("GLOG_v", "3")
    env["PYTHONWARNINGS"] = "ignore"
    # msrun starts workers with the first `python` on PATH: make it ours.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    paths = [str(PROJECT_ROOT), os.getcwd(), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def start(argv: list[str], trial_dir: Path, marker: str) -> TrialProcess:
    """Launch in a new session (its own process group), output to files in trial_dir."""
    with open(trial_dir / "stdout.log", "ab") as out, open(trial_dir / "stderr.log", "ab") as err:
        popen = subprocess.Popen(argv, cwd=trial_dir, stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, env=trial_env(marker),
                                 start_new_session=True)
    return TrialProcess(popen=popen, pgid=popen.pid, marker=marker, started=time.time())


def kill_group(pgid: int, grace_s: float = 2.0) -> None:
    """SIGTERM the group, then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.time() + grace_s
        while time.time() < deadline:
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


def kill_marked(marker: str) -> int:
    """Kill every process of a trial, found by its marker; how many there were."""
    pids = processes_with_marker(marker)
    groups = set()
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    for pgid in groups:
        kill_group(pgid, grace_s=1.0)
    for pid in processes_with_marker(marker):  # a process that left its group
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


def stop(proc: TrialProcess) -> None:
    """Kill the trial's process group and anything else carrying its marker; reap it."""
    kill_group(proc.pgid)
    kill_marked(proc.marker)
    try:
        proc.popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
