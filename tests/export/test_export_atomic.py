"""Export is atomic: an export killed with SIGKILL at any step leaves a complete export at
its destination, or the previous one beside it to be restored; the next export restores
it and removes what the killed one left (autotune/export/atomic.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autotune.export.atomic import PAUSE_ENV, leftovers, recover
from tests.conftest import ROOT, project_env

FILES = {"job.yaml", "launch.sh", "env.sh", "requirements.txt", "job.sbatch",
         "mindformers.yaml", "mindformers_train.yaml", "provenance.json", "CHANGES.md",
         "README.md", "SHA256SUMS", "src"}


def export_steps(out: Path) -> int | None:
    """The export's run.steps when it is complete (every file, each readable), else None."""
    if not out.is_dir() or {p.name for p in out.iterdir()} != FILES:
        return None
    json.loads((out / "provenance.json").read_text())
    return yaml.safe_load((out / "job.yaml").read_text())["run"]["steps"]


@pytest.fixture
def study(harness):
    space = harness.space("ex", {"train.micro_batches": [1, 2]})
    harness.script()
    code, _, err = harness.run(space, "sweep.n_trials=2", "sweep.neighbours=true")
    assert code == 0, err
    return harness.overrides(space)


def export_argv(overrides: list[str], out: Path, steps: int) -> list[str]:
    return ["export", *overrides, f"export.out={out}", "export.overwrite=true",
            f"export.steps={steps}"]


def kill_export_at(step: str, overrides: list[str], out: Path, steps: int) -> None:
    """Run an export in a process of its own, SIGKILL it once it reaches ``step``."""
    proc = subprocess.Popen([sys.executable, "-m", "autotune",
                             *export_argv(overrides, out, steps)], cwd=ROOT,
                            env={**project_env(), PAUSE_ENV: step}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # ends when the process does: a failed export fails here
            if line.strip() == f"export paused at {step}":
                break
        else:
            pytest.fail(f"the export never reached {step}: {proc.stderr.read()[-2000:]}")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


# step -> the export in place once the killed one is recovered: the old (100 steps) until the
# new one (200) has been renamed into place.
KILL_POINTS = {"written": 100, "staged": 100, "aside": 100, "swapped": 200}


@pytest.mark.parametrize("step, recovered", KILL_POINTS.items())
def test_an_export_killed_at_any_step_leaves_an_export_and_the_next_cleans_up(
        study, tmp_path, step, recovered):
    from autotune.cli import main

    out = tmp_path / "best_job"
    assert main(export_argv(study, out, 100)) == 0
    kill_export_at(step, study, out, 200)
    staging, asides = leftovers(out)
    # Rule: at every moment a complete export is at the destination, or (between the two
    # renames) the previous one lies complete beside it, to be restored.
    assert export_steps(out) in (100, 200) or (
        not out.exists() and any(export_steps(a) == 100 for a in asides)), (staging, asides)
    recover(out)
    assert export_steps(out) == recovered
    assert leftovers(out) == ([], [])
    # Rule: the next export works as if nothing had happened, and leaves nothing beside it.
    assert main(export_argv(study, out, 300)) == 0
    assert export_steps(out) == 300 and leftovers(out) == ([], [])


def test_the_next_export_restores_an_export_left_aside_and_removes_old_debris(
        study, tmp_path, capsys):
    from autotune.cli import main

    out = tmp_path / "best_job"
    assert main(export_argv(study, out, 100)) == 0
    kill_export_at("aside", study, out, 200)
    legacy = tmp_path / ".best_job-k3j2x9_a"  # a staging directory of the old scheme
    legacy.mkdir()
    (legacy / "job.yaml").write_text("half")
    assert not out.exists()
    capsys.readouterr()
    # Without overwrite the export is refused (the restored export is not empty) ...
    assert main(["export", *study, f"export.out={out}"]) == 2
    # ... but the export that had been moved aside is back, and the debris is gone.
    assert "restored the previous export" in capsys.readouterr().out
    assert export_steps(out) == 100 and leftovers(out) == ([], [])
    assert not legacy.exists()


def test_a_first_export_killed_leaves_no_export_and_its_staging_goes_next_time(
        study, tmp_path):
    from autotune.cli import main

    out = tmp_path / "fresh"
    kill_export_at("staged", study, out, 200)
    staging, asides = leftovers(out)
    assert not out.exists() and len(staging) == 1 and asides == []
    assert main(export_argv(study, out, 300)) == 0
    assert export_steps(out) == 300 and leftovers(out) == ([], [])


def test_another_exports_directories_are_not_touched(tmp_path):
    (tmp_path / "best").mkdir()
    neighbours = [tmp_path / ".best-2~staging-abc", tmp_path / ".best_job~old-1234",
                  tmp_path / "best-old"]
    for path in neighbours:
        path.mkdir()
    # Rule: only the debris of this destination's exports is its to remove.
    assert recover(tmp_path / "best") == []
    assert all(p.exists() for p in neighbours)
