"""The one recipe for starting a trial: its argv and its environment.

The sweep, ``confirm``, the exported ``launch.sh``, the benchmarks and the tests
all start the trial program through these two functions, so a change to how a
trial starts (msrun flags, PYTHONPATH, log quieting) is made once.

    argv = trial_argv(config, world_size=2, log_dir=trial_dir / "msrun_log")
    subprocess.Popen(argv, env=trial_env(os.environ, marker="study/3/..."), ...)

dp > 1 goes through ``msrun`` (one process per rank; mccl on the CPU). msrun
starts its workers with the first ``python`` on PATH, so the environment puts
the interpreter's own directory first.

A job on several nodes runs one msrun per node (``nodes=N``, ``node_rank=i``), all
pointing at the first node's ``master_addr`` and one agreed ``master_port``:

    argv = msrun_argv(script, 16, nodes=2, node_rank=1, master_addr="node-a",
                      master_port=8118)
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRIAL_SCRIPT = PROJECT_ROOT / "trials" / "train.py"
#: Every process of a trial carries this variable, so its orphans can be found and killed.
#: Its value, new for every launch, is also the launch's run id: the metrics writer stamps
#: it on every record (trials/contract/metrics.py), and the orchestrator reads only the
#: records of the launch it started.
MARKER_ENV = "AUTOTUNE_TRIAL"


def launch_run_id(env: Mapping[str, str] | None = None) -> str | None:
    """The run id the orchestrator gave this launch, or None (started by hand)."""
    return (os.environ if env is None else env).get(MARKER_ENV) or None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trial_argv(config: str | Path | None, *, world_size: int, python: str = sys.executable,
               trial_command: Sequence[str] = (), log_dir: str | Path | None = None,
               master_port: int | str | None = None, master_addr: str = "127.0.0.1",
               nodes: int = 1, node_rank: int | str = 0,
               overrides: Sequence[str] = (),
               trial_script: str | Path = TRIAL_SCRIPT) -> list[str]:
    """argv of one trial on one node (of ``nodes``: this one is ``node_rank``).

    ``config`` is a resolved config file (None: compose ``conf/`` with ``overrides``
    alone); ``overrides`` go after it. ``trial_command`` replaces the trial program
    (a user's own, or the tests' scripted fake). One rank on one node runs the trial
    program itself; anything else goes through msrun (see :func:`msrun_argv`) on
    ``trial_script`` (an exported job's own copy: ``src/trials/train.py``).
    """
    program = ["--config", str(config)] if config is not None else []
    if trial_command:
        return [*trial_command, *program, *overrides]
    if world_size == 1 and nodes == 1:
        return [python, "-m", "trials.train", *program, *overrides]
    return [*msrun_argv(trial_script, world_size, nodes=nodes, node_rank=node_rank,
                        log_dir=log_dir, master_port=master_port, master_addr=master_addr),
            *program, *overrides]


def msrun_argv(script: str | Path, world_size: int, *, nodes: int = 1,
               node_rank: int | str = 0, log_dir: str | Path | None = None,
               master_port: int | str | None = None, master_addr: str = "127.0.0.1"
               ) -> list[str]:
    """``msrun`` running ``script`` on ``world_size`` ranks (the program's own arguments
    go after it); the one place of msrun's flags. ``master_port`` None: a free port;
    ``--join=True``: msrun waits for its workers and exits with their status.

    ``nodes`` > 1: this is node ``node_rank`` of ``nodes``, each running
    ``world_size // nodes`` of the ``world_size`` ranks, all meeting at ``master_addr``
    (the first node's) and ``master_port``, which every node must be given alike: a
    free port picked here is free only here, so it is required. ``node_rank`` and
    ``master_addr`` may be shell placeholders (``"$NODE_RANK"``) for a script.
    """
    if nodes < 1:
        raise ValueError(f"nodes={nodes} must be at least 1")
    if world_size < 1 or world_size % nodes:
        raise ValueError(f"world_size={world_size} ranks do not split evenly over "
                         f"{nodes} nodes")
    if nodes == 1:
        port = free_port() if master_port is None else master_port
        argv = ["msrun", f"--worker_num={world_size}", f"--local_worker_num={world_size}",
                f"--master_addr={master_addr}", f"--master_port={port}", "--join=True"]
    else:
        if master_port is None:
            raise ValueError(f"msrun on {nodes} nodes needs a master_port that every node "
                             "is given alike")
        argv = ["msrun", f"--worker_num={world_size}",
                f"--local_worker_num={world_size // nodes}", f"--node_rank={node_rank}",
                f"--master_addr={master_addr}", f"--master_port={master_port}",
                "--join=True"]
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
    # Relative entries (PYTHONPATH=src) are the user's working directory's: made absolute
    # here, because a trial (and the import check before it) runs in a directory of its own.
    cwd = os.getcwd()
    given = [os.path.join(cwd, p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths = [str(PROJECT_ROOT), cwd, *given]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


#: Placeholders an argv word may carry into :func:`shell_script`, and what each becomes.
PLACEHOLDERS = {
    "$MASTER_PORT": '"${MASTER_PORT:-8118}"',
    "$NODE_RANK": '"${NODE_RANK:-0}"',
    "$MASTER_ADDR": '"${MASTER_ADDR:-127.0.0.1}"',
}
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))

#: Where a multi-node script finds its node's rank and the first node's address.
NODE_PREAMBLE = (
    "# msrun runs once on every node: each needs its own node rank and the first node's\n"
    "# address. Given in the environment, they are used as they are; inside a SLURM job\n"
    "# they come from SLURM (srun sets SLURM_NODEID per node; the first host of the\n"
    "# job's node list is the master); outside one, this node alone: 0 and 127.0.0.1.\n"
    'NODE_RANK="${NODE_RANK:-${SLURM_NODEID:-0}}"\n'
    'if [ -z "${MASTER_ADDR:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then\n'
    '  # sed, not head: it reads the whole list, so pipefail sees no SIGPIPE\n'
    '  MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"\n'
    "fi\n"
    'MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}"\n'
)


def _shell_word(word: str) -> str:
    """One argv word for bash: literal parts quoted, placeholders expanded."""
    if word == "$PY":
        return '"$PY"'
    parts, end = [], 0
    for match in _PLACEHOLDER.finditer(word):
        if match.start() > end:
            parts.append(shlex.quote(word[end:match.start()]))
        parts.append(PLACEHOLDERS[match.group()])
        end = match.end()
    if end == 0:
        return shlex.quote(word)
    if end < len(word):
        parts.append(shlex.quote(word[end:]))
    return "".join(parts)


def shell_script(argv: Sequence[str], *, python: str = sys.executable,
                 comment: str = "", environment: str | None = None) -> str:
    """A bash script that runs ``argv`` in the trial environment; extra arguments are
    appended as overrides. ``$PY`` (default: this interpreter) may be overridden by
    ``PYTHON=...``; ``$MASTER_PORT``, ``$NODE_RANK`` and ``$MASTER_ADDR`` by the caller's
    environment, the last two else by SLURM's (:data:`NODE_PREAMBLE`).

    ``environment``: bash lines that set ``PY`` and ``PYTHONPATH`` instead of this
    checkout's (an exported job finds its own: autotune/export/environment.py)."""
    words = [_shell_word(word) for word in argv]
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    nodes = (NODE_PREAMBLE if any("$NODE_RANK" in w or "$MASTER_ADDR" in w for w in argv)
             else "")
    if environment is None:
        environment = (f'PY="${{PYTHON:-{python}}}"\n'
                       f'export PYTHONPATH="{PROJECT_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}"\n')
    return (
        "#!/usr/bin/env bash\n"
        f"{head}"
        "set -euo pipefail\n"
        'cd "$(dirname "$0")"\n'
        f"{environment}"
        'export PATH="$(dirname "$PY"):$PATH"  # msrun starts workers with the first python\n'
        'export GLOG_v="${GLOG_v:-3}" PYTHONWARNINGS=ignore\n'
        f"{nodes}"
        f'{" ".join(words)} "$@"\n')
