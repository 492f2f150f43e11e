"""The process boundary is the dependency boundary, proven at run time (import-linter
proves it statically in `make lint`)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT, project_env

_IMPORT_ALL = """
import importlib, json, pkgutil, sys
import {package}
names = [m.name for m in pkgutil.walk_packages({package}.__path__, "{package}.")
         if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(json.dumps({{"modules": names, "loaded": sorted(
    m for m in ("mindspore", "optuna") if m in sys.modules)}}))
"""


def imported(package: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _IMPORT_ALL.format(package=package)],
                          cwd=ROOT, env=project_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_orchestrator_module_imports_without_mindspore():
    result = imported("autotune")
    # Rule: importing all of autotune (every command, report, export) never loads MindSpore.
    assert "autotune.sweep" in result["modules"] and "autotune.export.job" in result["modules"]
    assert "mindspore" not in result["loaded"]
    assert "optuna" in result["loaded"]  # the check can see what was loaded


def test_the_contract_imports_neither_mindspore_nor_optuna():
    result = imported("trials.contract")
    assert "trials.contract.launch" in result["modules"]
    assert result["loaded"] == []
