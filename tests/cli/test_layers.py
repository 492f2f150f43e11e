"""The process boundary is the dependency boundary, proven at run time (import-linter
proves it statically in `make lint`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def _lint_imports_on_a_copy(tmp_path, edit) -> subprocess.CompletedProcess:
    """``lint-imports`` on a copy of the packages with ``edit(copy_root)`` applied."""
    import shutil

    for name in ("autotune", "trials"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    edit(tmp_path)
    lint = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(lint), "--config", "pyproject.toml"], cwd=tmp_path,
                          env={**project_env(), "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)


def test_an_upward_import_breaks_the_layers_contract(tmp_path):
    def study_imports_the_sweep(root):
        records = root / "autotune" / "study" / "records.py"
        records.write_text(records.read_text() + "\nimport autotune.sweep  # noqa\n")

    proc = _lint_imports_on_a_copy(tmp_path, study_imports_the_sweep)
    # Rule: the study layer importing the sweep (an upward import) fails `make lint`.
    assert proc.returncode != 0
    assert "The orchestrator's layers: no import runs upward BROKEN" in proc.stdout
    assert "autotune.study.records -> autotune.sweep" in proc.stdout


def test_a_cycle_between_siblings_breaks_the_acyclic_contract(tmp_path):
    def noise_imports_selection(root):
        noise = root / "autotune" / "study" / "noise.py"
        noise.write_text(noise.read_text() + "\nimport autotune.study.selection  # noqa\n")

    proc = _lint_imports_on_a_copy(tmp_path, noise_imports_selection)
    # Rule: two sibling modules importing each other fail `make lint`.
    assert proc.returncode != 0
    assert "No import cycles between sibling modules or packages BROKEN" in proc.stdout
