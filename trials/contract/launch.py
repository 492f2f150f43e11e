"""The one recipe for starting a trial: its argv and its environment.

The sweep, ``confirm``, the exported ``launch.sh``, the benchmarks and the tests
all start the trial program through these two functions, so a change to how a
trial starts (msrun flags, PYTHONPATH, log quieting) is made once.

    argv = trial_argv(config, world_size=2, log_dir=trial_dir / "msrun_log")
    subprocess.Popen(argv, env=trial_env(os.environ, marker="study/3/..."), ...)

dp > 1 goes through ``msrun`` (one process per rank; mccl on the CPU). msrun
starts its workers with the first ``python`` on PATH, so the environment puts
the interpreter's own directory first.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRIAL_SCRIPT = PROJECT_ROOT / "trials" / "train.py"
#: Every process of a trial carries this variable, so its orphans can be found and killed.
MARKER_ENV = "AUTOTUNE_TRIAL"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trial_argv(config: str | Path | None, *, world_size: int, python: str = sys.executable,
               trial_command: Sequence[str] = (), log_dir: str | Path | None = None,
               master_port: int | str | None = None, master_addr: str = "127.0.0.1",
               overrides: Sequence[str] = ()) -> list[str]:
    """argv of one trial on one node.

    ``config`` is a resolved config file (None: compose ``conf/`` with ``overrides``
    alone); ``overrides`` go after it. ``trial_command`` replaces the trial program
    (a user's own, or the tests' scripted fake).
    """
    program = ["--config", str(config)] if config is not None else []
    if trial_command:
        return [*trial_command, *program, *overrides]
    if world_size == 1:
        return [python, "-m", "trials.train", *program, *overrides]
    return [*msrun_argv(TRIAL_SCRIPT, world_size, log_dir=log_dir, master_port=master_port,
                        master_addr=master_addr), *program, *overrides]


def msrun_argv(script: str | Path, world_size: int, *, log_dir: str | Path | None = None,
               master_port: int | str | None = None, master_addr: str = "127.0.0.1"
               ) -> list[str]:
    """``msrun`` running ``script`` on ``world_size`` ranks of this node (the program's own
    arguments go after it); the one place of msrun's flags. ``master_port`` None: a free
    port; ``--join=True``: msrun waits for its workers and exits with their status."""
    port = free_port() if master_port is None else master_port
    argv = ["msrun", f"--worker_num={world_size}", f"--local_worker_num={world_size}",
            f"--master_addr={master_addr}", f"--master_port={port}", "--join=True"]
    if log_dir is not None:
        argv.append(f"--log_dir={log_dir}")
    return [*argv, str(script)]


def trial_env(base: Mapping[str, str], *, marker: str | None = None,
              python: str = sys.executable) -> dict[str, str]:
    """The environment of a trial: ``base`` plus the project on PYTHONPATH, quiet logs,
    the interpreter's directory first on PATH (for msrun) and the orphan marker."""
    env = dict(base)
    if marker is not None:
        env[MARKER_ENV] = marker
    env.setdefault("GLOG_v", "3")  # MindSpore's C++ and Python logs; read before import
    env["PYTHONWARNINGS"] = "ignore"
    env["PATH"] = os.pathsep.join(p for p in (str(Path(python).parent), env.get("PATH", ""))
                                  if p)
    # The working directory too, so that a user's workload.entry next to them imports.
    paths = [str(PROJECT_ROOT), os.getcwd(), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def shell_script(argv: Sequence[str], *, python: str = sys.executable,
                 comment: str = "") -> str:
    """A bash script that runs ``argv`` in the trial environment; extra arguments are
    appended as overrides. ``$PY`` (default: this interpreter) may be overridden by
    ``PYTHON=...``; ``$MASTER_PORT`` by the caller's environment."""
    words = []
    for word in argv:
        if word == "$PY":
            words.append('"$PY"')
        elif "$MASTER_PORT" in word:
            words.append(word.replace("$MASTER_PORT", '"${MASTER_PORT:-8118}"'))
        else:
            words.append(shlex.quote(word))
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return (
        "#!/usr/bin/env bash\n"
        f"{head}"
        "set -euo pipefail\n"
        'cd "$(dirname "$0")"\n'
        f'PY="${{PYTHON:-{python}}}"\n'
        f'export PYTHONPATH="{PROJECT_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        'export PATH="$(dirname "$PY"):$PATH"  # msrun starts workers with the first python\n'
        'export GLOG_v="${GLOG_v:-3}" PYTHONWARNINGS=ignore\n'
        f'{" ".join(words)} "$@"\n')
