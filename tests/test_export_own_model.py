"""A user's own image model (a module ``imgcls`` next to their code, the data-bound preset
underneath) swept, exported and run from a copy: no GPT keys, no mindformers.yaml, and
``launch.sh`` carries the workload's module (real MindSpore)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import project_env
from tests.test_export_confirm import run_copied_job
from tests.test_export_job import IMGCLS

#: One short baseline of the image preset under the user's module name.
STUDY = ["workload=image_cnn", "workload.entry=imgcls:make_workload",
         "workload.options.augment_passes=2", "search=data", "sweep.study=img",
         "sweep.n_trials=1", "sweep.progress=false", "run.warmup_steps=1",
         "run.measure_steps=3", "run.adaptive=false", "run.probe_batches=2"]


def autotune(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=cwd,
                          env=project_env(), capture_output=True, text=True, timeout=400)


@pytest.mark.slow
def test_an_own_models_job_has_no_gpt_keys_and_runs_from_a_copy(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "imgcls.py").write_text(IMGCLS)
    common = [*STUDY, f"sweep.runs_dir={tmp_path / 'runs'}"]
    proc = autotune("sweep", *common, cwd=user)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "export"
    # No MindFormers config to merge an image model into: refused in one line, exit 2.
    proc = autotune("export", *common, f"export.out={out}",
                    "export.mindformers_base=examples/mindformers/llama2_7b.yaml", cwd=user)
    assert proc.returncode == 2 and "not a MindFormers model" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()
    proc = autotune("export", *common, f"export.out={out}", cwd=user)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (out / "mindformers.yaml").exists()
    assert (out / "src" / "imgcls.py").read_text() == IMGCLS
    job = yaml.safe_load((out / "job.yaml").read_text())
    assert not {"arch", "n_layers", "d_model", "seq_len", "vocab_size"} & set(job["workload"])
    assert "source" not in job["data"]
    changes = (out / "CHANGES.md").read_text()
    assert "not a MindFormers model" in changes and "data.source" not in changes
    source = json.loads((out / "provenance.json").read_text())["source"]
    assert source["workload"]["carried"] == "src/imgcls.py" and source["workload"]["sha256"]
    # Copied away from the user's directory and this checkout, run from a third place.
    moved = tmp_path / "copy"
    shutil.copytree(out, moved)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = run_copied_job(moved, "run.steps=3", cwd=elsewhere)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    [summary] = [line for line in run.stdout.splitlines() if line.startswith("job done:")]
    assert re.match(r"job done: steps 1-3 of 3 \(3 this run\), [\d,]+ samples/s", summary)
    assert summary.endswith(str(moved / "checkpoints" / "step-00000003.safetensors"))
    check = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=moved,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
