"""Every printed command names the interpreter that runs autotune now
(autotune/presentation/invocation.py): run as printed, it finds the project (and
MindFormers, where the sweep ran with it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autotune.presentation.invocation import autotune_command

REPO = Path(__file__).resolve().parents[2]
ASK = "from autotune.presentation.invocation import autotune_command as c; print(c('confirm'))"


def ask(env: dict, cwd: Path, python: str = sys.executable) -> str:
    return subprocess.run([python, "-c", ASK], cwd=cwd, env={**env, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, check=True).stdout.strip()


def test_an_activated_environment_is_named_python_and_any_other_by_its_path(tmp_path):
    base = {"PATH": "/usr/bin:/bin"}
    venv = Path(sys.prefix)
    # Rule: the environment the shell activated is `python` (what the docs' commands use).
    assert ask({**base, "VIRTUAL_ENV": str(venv)}, REPO) == "python -m autotune confirm"
    # Rule: `make sweep` runs .venv/bin/python with nothing activated: the hint names that
    # interpreter, relative to the working directory it lies under, absolute elsewhere.
    inside = ask(base, REPO)
    assert inside == f"{Path(sys.executable).relative_to(REPO)} -m autotune confirm"
    assert ask(base, tmp_path) == f"{sys.executable} -m autotune confirm"
    # Rule: another environment than the activated one (.venv-mindformers while .venv is
    # active) is named by its path, not as the activated one's `python`.
    assert ask({**base, "VIRTUAL_ENV": str(tmp_path)}, REPO) == inside


def test_a_command_joins_the_verb_and_its_overrides():
    assert autotune_command("profile", "profile.trial=3", "sweep.study=mf").endswith(
        " -m autotune profile profile.trial=3 sweep.study=mf")
