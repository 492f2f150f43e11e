"""The exported job's environment: which Python runs it, and what that Python needs.

``env.sh`` (sourced by ``launch.sh``) picks the interpreter: ``AUTOTUNE_PYTHON``, else
the nearest ``.venv`` in the job's directory or a directory above it (a job exported
inside the checkout, ``best_job/``, finds the checkout's; one copied elsewhere, its own),
else ``python3``; ``requirements.txt`` pins the packages the
trial program imports at the versions the study measured with. ``launch.sh`` then puts
the job's ``src/`` first on PYTHONPATH and checks, without importing them, that the
interpreter finds every module the job needs, naming what is missing in one line.
"""

from __future__ import annotations

import platform
from importlib import metadata

from autotune.export.carry import SRC
from trials.contract.mindformers import ADAPTER_ENTRY
from trials.contract.schema import TrialConfig

#: What the trial program imports (distribution, import name).
PACKAGES = (("mindspore", "mindspore"), ("numpy", "numpy"), ("omegaconf", "omegaconf"),
            ("hydra-core", "hydra"), ("PyYAML", "yaml"))
MINDFORMERS = ("mindformers", "mindformers")


def _packages(job: TrialConfig) -> tuple[tuple[str, str], ...]:
    return PACKAGES + ((MINDFORMERS,) if job.workload.entry == ADAPTER_ENTRY else ())


def requirements(job: TrialConfig) -> str:
    """requirements.txt: each package at the version of the exporting environment."""
    lines = [f"# The trial program's packages, at the versions the study measured with "
             f"(Python {platform.python_version()}).",
             "# Your workload's own dependencies, if any, go here too."]
    for dist, _ in _packages(job):
        try:
            lines.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            lines.append(f"{dist}  # not installed where this was exported")
    return "\n".join(lines) + "\n"


ENV_SH = """\
# The environment of this job; launch.sh (and so job.sbatch) sources it.
#
# It needs Python {python} with the packages of requirements.txt. Make one beside
# this file (MindSpore's wheels: https://www.mindspore.cn/install):
#     python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
# or point at one that exists:
#     AUTOTUNE_PYTHON=/path/to/venv/bin/python bash launch.sh
# The Python that runs the job: AUTOTUNE_PYTHON, else the nearest .venv/bin/python here or
# in a directory above (a job exported inside a checkout finds the checkout's), else python3.
if [ -n "${{AUTOTUNE_PYTHON:-}}" ]; then
  PY="$AUTOTUNE_PYTHON"
else
  PY=""
  dir="$PWD"
  while [ -z "$PY" ]; do
    if [ -x "$dir/.venv/bin/python" ]; then PY="$dir/.venv/bin/python"; fi
    if [ "$dir" = / ]; then break; fi
    dir="$(dirname "$dir")"
  done
  if [ -z "$PY" ]; then PY="$(command -v python3 || true)"; fi
fi
if [ -z "$PY" ] || ! command -v "$PY" >/dev/null 2>&1; then
  echo "env.sh: no Python${{PY:+ at $PY}}: set AUTOTUNE_PYTHON=/path/to/python" \\
    "or make .venv (see env.sh)" >&2
  exit 2
fi
"""


def env_script() -> str:
    return ENV_SH.format(python=".".join(platform.python_version_tuple()[:2]))


#: Finds each module without importing it (MindSpore's import takes seconds).
_CHECK = ("import importlib.util as u, sys; "
          "m = [n for n in sys.argv[1:] if u.find_spec(n) is None]; "
          "m and sys.exit('launch.sh: %s cannot import %s: build the environment env.sh "
          "describes, or set AUTOTUNE_PYTHON=/path/to/python' % (sys.executable, "
          "', '.join(m)))")


def launch_environment(job: TrialConfig, modules: list[str]) -> str:
    """launch.sh's lines that set PY and PYTHONPATH, and check what the job imports."""
    names = [name for _, name in _packages(job)] + modules
    return ("# Python: env.sh (AUTOTUNE_PYTHON, else the nearest .venv, else python3). The\n"
            f"# trial program and the workload: this job's own copy in {SRC}/, first.\n"
            ". ./env.sh\n"
            f'export PYTHONPATH="$PWD/{SRC}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            f'"$PY" -c "{_CHECK}" {" ".join(names)} || exit 2\n')
