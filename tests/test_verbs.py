"""The CLI's verbs and the command modules are one list: each verb is a module with a
``run``, each module a verb, and ``--help`` names every verb and prints each one's page."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from autotune import help as help_pages
from autotune.cli import COMMANDS, command_module, main
from autotune.commands import (
    calibrate,
    calibrate_host,
    commbench,
    confirm,
    dashboard,
    export,
    plan,
    profile,
    report,
    soak,
    sweep,
    tune,
)
from tests.conftest import ROOT

MODULES = (calibrate, calibrate_host, commbench, confirm, dashboard, export, plan, profile,
           report, soak, sweep, tune)


def test_every_verb_is_a_command_module_with_run_and_every_module_a_verb():
    on_disk = {p.stem for p in (ROOT / "autotune" / "commands").glob("*.py")} - {"__init__"}
    # Rule: the verbs and the modules of autotune/commands are the same set.
    assert {command_module(c).rsplit(".", 1)[1] for c in COMMANDS} == on_disk
    assert {m.__name__ for m in MODULES} == {command_module(c) for c in COMMANDS}
    for module in MODULES:
        # Rule: each module's entry is run(composed, overrides, console).
        assert list(inspect.signature(module.run).parameters)[:3] == [
            "composed", "overrides", "console"], module.__name__


@pytest.mark.parametrize("verb", COMMANDS)
def test_each_verbs_help_page_opens_with_its_modules_docstring(verb, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([verb, "--help"])
    page = capsys.readouterr().out
    module = next(m for m in MODULES if m.__name__ == command_module(verb))
    first = help_pages.plain(inspect.getdoc(module)).splitlines()[0]
    # Rule: --help of a verb exits 0 with its own page, which opens with its docstring.
    assert exit_.value.code == 0 and first in page


def test_python_m_autotune_help_lists_every_verb():
    out = subprocess.run([sys.executable, "-m", "autotune", "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    # Rule: the entry point (autotune/__main__.py) answers --help with every verb.
    assert out.returncode == 0, out.stderr
    assert all(verb in out.stdout for verb in COMMANDS)
