"""How a printed hint names this program: the command line that runs autotune again the way
it runs now.

A hint printed as ``python -m autotune profile ...`` runs only where ``python`` is this
interpreter. After ``make sweep`` (``.venv/bin/python``, no activated environment) the
system's ``python`` lacks the project; after ``make sweep-mindformers``
(``.venv-mindformers/bin/python``) the activated ``.venv`` lacks MindFormers. Every hint
that names a command therefore comes from :func:`autotune_command`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def interpreter() -> str:
    """``python`` where that word runs this interpreter (its virtual environment is the
    activated one, or none is active and this is not one), else this interpreter's path,
    relative to the working directory where it lies under it."""
    active = os.environ.get("VIRTUAL_ENV")
    in_venv = sys.prefix != sys.base_prefix
    if (active and Path(active).resolve() == Path(sys.prefix).resolve()) or (
            not active and not in_venv):
        return "python"
    executable = Path(sys.executable)  # a venv's own path, not the interpreter it links to
    try:
        return str(executable.relative_to(Path.cwd()))
    except ValueError:
        return str(executable)


def autotune_command(verb: str, *args: str) -> str:
    """``<interpreter> -m autotune <verb> <args...>``: the one spelling of every command a
    message tells the user to run."""
    return " ".join([interpreter(), "-m", "autotune", verb, *args])
