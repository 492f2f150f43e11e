"""The exported job's environment: which Python runs it, and what that Python needs.

``env.sh`` (sourced by ``launch.sh``) picks the interpreter: ``AUTOTUNE_PYTHON``, else
the nearest virtual environment in the job's directory or a directory above it, by the
name of the one that exported it first (``.venv-mindformers`` for a MindFormers study),
then ``.venv`` (a job exported inside the checkout, ``best_job/``, finds the checkout's;
one copied elsewhere, its own), else ``python3``. ``requirements.txt`` pins the packages
the trial program imports at the versions the study measured with; a package whose own
metadata cannot resolve beside them (MindFormers 2.1.0 declares MindSpore 2.11 and a
package not on PyPI) goes to ``requirements-no-deps.txt``, installed without its declared
dependencies, and the ones of those the study's environment had join ``requirements.txt``
at its versions. ``launch.sh`` then puts the job's ``src/`` first on PYTHONPATH and checks,
without importing them, that the interpreter finds every module the job needs, naming
what is missing in one line.
"""

from __future__ import annotations

import platform
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path

from autotune.export.carry import SRC
from trials.contract.mindformers import ADAPTER_ENTRY
from trials.contract.schema import TrialConfig

#: What the trial program imports (distribution, import name).
PACKAGES = (("mindspore", "mindspore"), ("numpy", "numpy"), ("omegaconf", "omegaconf"),
            ("hydra-core", "hydra"), ("PyYAML", "yaml"))
MINDFORMERS = ("mindformers", "mindformers")


def _packages(job: TrialConfig) -> tuple[tuple[str, str], ...]:
    return PACKAGES + ((MINDFORMERS,) if job.workload.entry == ADAPTER_ENTRY else ())


#: Distributions installed without their declared dependencies (``pip install --no-deps``):
#: MindFormers 2.1.0 declares mindspore~=2.11 and hyper-parallel (not on PyPI), so pip
#: cannot resolve it beside the MindSpore 2.10 the study ran on
#: (requirements-mindformers.txt at the checkout's root says how it was installed).
NO_DEPS = ("mindformers",)
NO_DEPS_FILE = "requirements-no-deps.txt"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


#: Installer tooling, left out as ``pip freeze`` leaves it out.
INSTALLERS = ("pip", "setuptools", "wheel", "distribute")


def installed_dependencies(root: str) -> list[tuple[str, str]]:
    """(distribution, version) of what ``root`` declares, and what those declare in turn,
    that this environment has: what the study ran with. A declared one it lacks is left
    out (the study ran without it: MindFormers imports many lazily), as are extras."""
    seen, todo, out = {_canonical(root)}, [root] if _version(root) else [], []
    while todo:
        for spec in metadata.requires(todo.pop()) or ():
            if "extra" in spec.partition(";")[2]:
                continue
            name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec).group(0)
            version = _version(name)
            if _canonical(name) in seen or version is None or _canonical(name) in INSTALLERS:
                continue
            seen.add(_canonical(name))
            out.append((name, version))
            todo.append(name)
    return sorted(out, key=lambda nv: _canonical(nv[0]))


def _installed_without_deps(job: TrialConfig) -> list[str]:
    """The job's packages pip installs with ``--no-deps`` (NO_DEPS)."""
    return [dist for dist, _ in _packages(job) if _canonical(dist) in NO_DEPS]


def _pin(dist: str) -> str:
    version = _version(dist)
    return f"{dist}=={version}" if version else f"{dist}  # not installed where this was exported"


def requirement_files(job: TrialConfig) -> dict[str, str]:
    """requirements.txt (each package at the version of the exporting environment) and,
    where the job needs a package pip cannot resolve, requirements-no-deps.txt."""
    loose = _installed_without_deps(job)
    lines = [f"# The trial program's packages, at the versions the study measured with "
             f"(Python {platform.python_version()}).",
             "# Your workload's own dependencies, if any, go here too.",
             *(_pin(dist) for dist, _ in _packages(job) if dist not in loose)]
    named = {_canonical(dist) for dist, _ in _packages(job)}
    extra = [f"{dist}=={version}" for root in loose
             for dist, version in installed_dependencies(root) if _canonical(dist) not in named]
    if extra:
        lines += [f"# What {', '.join(loose)} declares, as installed where this was exported",
                  f"# ({NO_DEPS_FILE} is installed without its declared dependencies).",
                  *extra]
    files = {"requirements.txt": "\n".join(lines) + "\n"}
    if loose:
        files[NO_DEPS_FILE] = (
            "# Installed with pip install --no-deps: its declared dependencies do not resolve\n"
            "# beside requirements.txt's; the ones the study ran with are there.\n"
            + "\n".join(_pin(dist) for dist in loose) + "\n")
    return files


ENV_SH = """\
# The environment of this job; launch.sh (and so job.sbatch) sources it.
#
# It needs Python {python} with the packages of requirements.txt. Make one beside
# this file (MindSpore's wheels: https://www.mindspore.cn/install):
#     python3 -m venv .venv && .venv/bin/pip install -r requirements.txt{no_deps}
# or point at one that exists:
#     AUTOTUNE_PYTHON=/path/to/venv/bin/python bash launch.sh
# The Python that runs the job: AUTOTUNE_PYTHON, else the nearest of
#     {names}
# here or in a directory above (a job exported inside a checkout finds the checkout's),
# else python3.
if [ -n "${{AUTOTUNE_PYTHON:-}}" ]; then
  PY="$AUTOTUNE_PYTHON"
else
  PY=""
  dir="$PWD"
  while [ -z "$PY" ]; do
    for venv in {venvs}; do
      if [ -z "$PY" ] && [ -x "$dir/$venv/bin/python" ]; then PY="$dir/$venv/bin/python"; fi
    done
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


def venv_names() -> list[str]:
    """The virtual environments env.sh looks for, in order: the one exporting (by its
    directory's name: ``.venv-mindformers`` for ``make sweep-mindformers``), then .venv."""
    own = [Path(sys.prefix).name] if sys.prefix != sys.base_prefix else []
    return list(dict.fromkeys(own + [".venv"]))


def env_script(job: TrialConfig) -> str:
    names = venv_names()
    no_deps = (f" \\\n#         && .venv/bin/pip install --no-deps -r {NO_DEPS_FILE}"
               if _installed_without_deps(job) else "")
    return ENV_SH.format(python=".".join(platform.python_version_tuple()[:2]),
                         no_deps=no_deps, names=" or ".join(f"{n}/bin/python" for n in names),
                         venvs=" ".join(shlex.quote(n) for n in names))


#: Finds each module without importing it (MindSpore's import takes seconds).
_CHECK = ("import importlib.util as u, sys; "
          "m = [n for n in sys.argv[1:] if u.find_spec(n) is None]; "
          "m and sys.exit('launch.sh: %s cannot import %s: build the environment env.sh "
          "describes, or set AUTOTUNE_PYTHON=/path/to/python' % (sys.executable, "
          "', '.join(m)))")


def launch_environment(job: TrialConfig, modules: list[str]) -> str:
    """launch.sh's lines that set PY and PYTHONPATH, and check what the job imports."""
    names = [name for _, name in _packages(job)] + modules
    return (f"# Python: env.sh (AUTOTUNE_PYTHON, else the nearest {' or '.join(venv_names())}, "
            "else python3). The\n"
            f"# trial program and the workload: this job's own copy in {SRC}/, first.\n"
            ". ./env.sh\n"
            f'export PYTHONPATH="$PWD/{SRC}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
            f'"$PY" -c "{_CHECK}" {" ".join(names)} || exit 2\n')
