"""What an exported job carries and says, without MindSpore: its own trial program and
workload (autotune/export/carry.py), the environment it finds (environment.py), only the
keys its workload reads, and scripts whose text counts right (job.py)."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autotune.export.atomic import write_atomically
from autotune.export.carry import carry, workload_files
from autotune.export.environment import (
    NO_DEPS_FILE,
    env_script,
    installed_dependencies,
    launch_environment,
    requirement_files,
    venv_names,
)
from autotune.export.job import (
    GPT_WORKLOAD_KEYS,
    export_readme,
    job_yaml,
    launch_script,
    mindformers_skipped,
    sbatch_script,
)
from tests.cli.test_cli_errors import assert_one_line_error
from tests.conftest import ROOT
from tests.export.test_export_multinode import job
from trials.contract.compose import load_resolved
from trials.contract.events import Phase, StepRecord
from trials.contract.schema import ConfigError, TrialConfig, to_trial_config, validate
from trials.job_summary import summary_line

IMGCLS = '"""A user\'s image classifier."""\nfrom trials.image_cnn import make_workload\n'


def test_job_sbatch_counts_devices_and_nodes_in_words():
    one = sbatch_script(job("workload=gpt_tiny"), study="s", trial=1)
    # Rule: a count of one takes the singular ("1 devices" was the slip).
    assert "1 device\n" in one and "1 node of cpu" in one and "1 device per node" in one
    assert not re.search(r"\b1 (devices|nodes)\b", one)
    big = sbatch_script(job("hardware=gpu_a100", "parallel.dp=16", "train.global_batch=32"),
                        study="s", trial=1)
    assert "16 devices\n" in big and "2 nodes of gpu_a100" in big
    assert "8 devices per node" in big


def test_a_users_own_model_exports_no_gpt_keys_and_no_mindformers_yaml():
    image = job("workload=image_cnn")
    text = job_yaml(image)
    node = yaml.safe_load(text)
    # Rule: only the keys the workload reads: no GPT dimensions, no text source.
    assert not set(GPT_WORKLOAD_KEYS) & set(node["workload"])
    assert not {"source", "text_dir", "max_bytes"} & set(node["data"])
    assert node["workload"]["entry"] == "trials.image_cnn:make_workload"
    assert node["data"]["num_workers"] == image.data.num_workers
    assert "gpt" not in text and "seq_len" not in text
    # The trial program loads it back whole (the schema's defaults fill the rest).
    reloaded = to_trial_config(load_resolved(_write(text), []))
    validate(reloaded)
    assert reloaded.workload.options == image.workload.options
    assert "not a MindFormers model" in mindformers_skipped(image)
    readme = export_readme(image, trial=1, study="s")
    assert "mindformers.yaml" not in readme and "AUTOTUNE_PYTHON" in readme


@pytest.mark.parametrize("workload", ["gpt_tiny", "mindformers_llama_tiny"])
def test_mindformers_shaped_models_keep_their_keys_and_mindformers_yaml(workload):
    cfg = job(f"workload={workload}")
    node = yaml.safe_load(job_yaml(cfg))
    assert node["workload"]["seq_len"] == cfg.workload.seq_len
    assert node["data"]["source"] == cfg.data.source.value
    assert mindformers_skipped(cfg) is None
    assert "mindformers.yaml" in export_readme(cfg, trial=1, study="s")


def _write(text: str) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "job.yaml"
    path.write_text(text)
    return path


def test_the_job_carries_its_trial_program_and_a_users_module(tmp_path, monkeypatch):
    user = tmp_path / "user"
    user.mkdir()
    (user / "imgcls.py").write_text(IMGCLS)
    monkeypatch.chdir(user)
    carried = carry(job("workload=image_cnn", "workload.entry=imgcls:make_workload"))
    assert carried.files["src/imgcls.py"] == IMGCLS.encode()
    assert carried.files["src/trials/train.py"] == (ROOT / "trials/train.py").read_bytes()
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in carried.files)
    assert carried.modules == ["imgcls"]
    source = carried.provenance
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and isinstance(source["dirty"], bool)
    # Rule: each digest is the sha256 of that part's SHA256SUMS lines, which hash the bytes.
    sums = carried.sha256sums().splitlines()
    line = next(s for s in sums if s.endswith("  src/imgcls.py"))
    assert line.split()[0] == hashlib.sha256(IMGCLS.encode()).hexdigest()
    assert source["workload"]["sha256"] == hashlib.sha256((line + "\n").encode()).hexdigest()
    program = "".join(s + "\n" for s in sums if s.split("  ")[1].startswith("src/trials/"))
    assert source["program"]["sha256"] == hashlib.sha256(program.encode()).hexdigest()
    assert source["program"]["files"] == sum(1 for s in sums if "  src/trials/" in s)


def test_a_workload_module_out_of_reach_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        workload_files("nowhere_to_be_found:make")
    message = str(info.value)
    assert "'nowhere_to_be_found' is not importable" in message and "PYTHONPATH" in message
    assert "\n" not in message


def test_a_preset_of_the_trial_program_is_carried_with_it_and_hashed():
    files, where = workload_files("trials.image_cnn:make_workload")
    assert files == {} and where["carried"].startswith("src/trials/")
    line = (f"{hashlib.sha256((ROOT / 'trials/image_cnn.py').read_bytes()).hexdigest()}"
            "  src/trials/image_cnn.py\n")
    assert where["sha256"] == hashlib.sha256(line.encode()).hexdigest()


def test_a_mindformers_workloads_yaml_travels_with_the_job(tmp_path, monkeypatch):
    cfg = job("workload=mindformers_llama_tiny")
    shipped = ROOT / "examples" / "mindformers" / "llama2_7b.yaml"
    assert Path(cfg.workload.options["config"]) == shipped  # pinned into this checkout
    carried = carry(cfg)
    # Rule: the MindFormers YAML the model is built from is a file of the job, hashed, and
    # job.yaml names it by the job-relative path, not by this checkout's.
    assert carried.files["src/llama2_7b.yaml"] == shipped.read_bytes()
    assert carried.provenance["workload_config"]["from"] == str(shipped)
    text = job_yaml(carried.job_config(cfg))
    assert yaml.safe_load(text)["workload"]["options"]["config"] == "src/llama2_7b.yaml"
    assert str(ROOT) not in text
    assert cfg.workload.options["config"] == str(shipped)  # the study's own config untouched
    # Loaded back where the job runs (its own directory), it reads the carried copy.
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "llama2_7b.yaml").write_bytes(carried.files["src/llama2_7b.yaml"])
    monkeypatch.chdir(tmp_path)
    reloaded = to_trial_config(load_resolved(_write(text), []))
    assert reloaded.workload.options["config"] == str(tmp_path / "src" / "llama2_7b.yaml")


def test_requirements_pin_the_measured_versions():
    from importlib import metadata

    files = requirement_files(job("workload=image_cnn"))
    assert set(files) == {"requirements.txt"}
    assert f"mindspore=={metadata.version('mindspore')}" in files["requirements.txt"].splitlines()
    assert "mindformers" not in files["requirements.txt"]
    # Rule: MindFormers, whose declared MindSpore 2.11 pip cannot resolve beside the 2.10
    # pinned, is installed without its dependencies, from a file of its own that env.sh's
    # recipe names (a single requirements.txt failed with ResolutionImpossible).
    mf = job("workload=mindformers_llama_tiny")
    files = requirement_files(mf)
    assert "mindformers" not in files["requirements.txt"]
    assert "mindformers" in files[NO_DEPS_FILE]
    assert f"pip install --no-deps -r {NO_DEPS_FILE}" in env_script(mf)
    assert NO_DEPS_FILE not in env_script(job("workload=image_cnn"))


def test_a_no_deps_packages_dependencies_are_pinned_as_the_study_had_them():
    from importlib import metadata

    # hydra-core declares omegaconf, antlr4-python3-runtime and packaging, all installed
    # here; the closure reads them (and theirs) at this environment's versions.
    closure = dict(installed_dependencies("hydra-core"))
    assert closure["omegaconf"] == metadata.version("omegaconf")
    assert closure["PyYAML"] == metadata.version("PyYAML")  # omegaconf's, one level down
    assert "hydra-core" not in closure
    # Rule: a declared dependency this environment lacks is left out, not pinned: the study
    # ran without it (MindFormers declares transformers and a package not on PyPI).
    assert all(metadata.version(name) == version for name, version in closure.items())


def _launch_dir(tmp_path: Path, cfg: TrialConfig, modules: list[str]) -> Path:
    out = tmp_path / "job"
    write_atomically(out, {"job.yaml": job_yaml(cfg), "launch.sh": launch_script(cfg, modules),
                           "env.sh": env_script(cfg)}, overwrite=False)
    return out


def _launch(out: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(out / "launch.sh")], cwd=out.parent,
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          text=True, timeout=60)


def test_launch_sh_names_the_missing_python_or_module_in_one_line(tmp_path):
    out = _launch_dir(tmp_path, job("workload=image_cnn"), ["imgcls"])
    text = (out / "launch.sh").read_text() + (out / "env.sh").read_text()
    # Rule: nothing of the exporting checkout: its venv, its PYTHONPATH.
    assert str(ROOT) not in text and sys.executable not in text
    proc = _launch(out, AUTOTUNE_PYTHON=str(tmp_path / "no-python"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "AUTOTUNE_PYTHON" in proc.stderr
    # A Python without MindSpore (the system one) or without the workload's module.
    proc = _launch(out, AUTOTUNE_PYTHON="/usr/bin/python3")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "cannot import mindspore" in proc.stderr and "imgcls" in proc.stderr
    proc = _launch(out, AUTOTUNE_PYTHON=sys.executable)
    assert proc.returncode == 2 and proc.stderr.strip().endswith(
        "cannot import imgcls: build the environment env.sh describes, or set "
        "AUTOTUNE_PYTHON=/path/to/python")


def test_launch_sh_takes_the_nearest_venv_above_the_job(tmp_path):
    # A job exported inside a checkout (best_job/ beside the checkout's .venv/), run as the
    # README runs it: `bash best_job/launch.sh`, with no AUTOTUNE_PYTHON.
    def venv(where: Path, python: str, name: str) -> None:
        (where / ".venv" / "bin").mkdir(parents=True)
        script = where / ".venv" / "bin" / "python"
        script.write_text(f'#!/bin/sh\necho "{name}" >&2\nexec {python} "$@"\n')
        script.chmod(0o755)

    venv(tmp_path, sys.executable, "the venv above")
    out = _launch_dir(tmp_path, job("workload=image_cnn"), ["imgcls"])
    proc = _launch(out)
    # Rule: the checkout's .venv runs it (it has MindSpore; only the workload is missing),
    # not the system python3, which has none of the job's packages.
    assert proc.returncode == 2 and proc.stderr.startswith("the venv above\n")
    assert proc.stderr.strip().endswith(
        "cannot import imgcls: build the environment env.sh describes, or set "
        "AUTOTUNE_PYTHON=/path/to/python")
    # Rule: the job's own .venv comes first, the one above it after.
    venv(out, "/usr/bin/python3", "the job's own venv")
    proc = _launch(out)
    assert proc.stderr.startswith("the job's own venv\n") and "cannot import mindspore" in \
        proc.stderr


def test_launch_sh_looks_first_for_the_environment_that_exported_it(tmp_path, monkeypatch):
    # `make sweep-mindformers` runs .venv-mindformers/bin/python; the checkout's .venv lacks
    # MindFormers (launch.sh picked it and failed "cannot import mindformers").
    for name in (".venv", ".venv-mindformers"):
        (tmp_path / name / "bin").mkdir(parents=True)
        script = tmp_path / name / "bin" / "python"
        script.write_text(f'#!/bin/sh\necho "{name}" >&2\nexit 2\n')
        script.chmod(0o755)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv-mindformers"))
    assert venv_names() == [".venv-mindformers", ".venv"]
    out = _launch_dir(tmp_path, job("workload=image_cnn"), ["imgcls"])
    assert _launch(out).stderr.startswith(".venv-mindformers\n")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))
    assert venv_names() == [".venv"]


def test_launch_environment_checks_the_trial_programs_packages_and_the_workload():
    lines = launch_environment(job("workload=image_cnn"), ["imgcls"])
    assert lines.splitlines()[-1].endswith("mindspore numpy omegaconf hydra yaml imgcls "
                                           "|| exit 2")
    assert 'PYTHONPATH="$PWD/src' in lines


def _step(step: int, step_s: float, peak: float) -> StepRecord:
    return StepRecord(step=step, phase=Phase.TRAIN, loss=1.0, grad_norm=1.0,
                      step_s=step_s, data_wait_s=0.0, tokens=64, peak_rss_gib=peak)


def test_the_summary_line_counts_this_runs_steps_after_the_compile_step():
    steps = [_step(3, 5.0, 0.5), _step(4, 0.5, 0.7), _step(5, 0.25, 0.6)]
    line = summary_line(steps, total_steps=6, unit="samples", checkpoint="/j/c.safetensors")
    # 64 samples over the median of the steps after the first (0.5 and 0.25 s): 0.375 s.
    assert line == ("job done: steps 4-6 of 6 (3 this run), 171 samples/s (median step "
                    "0.375 s), peak RSS 0.70 GiB, last checkpoint /j/c.safetensors")
    assert summary_line([], total_steps=6, unit="tokens", checkpoint=None) == (
        "job done: all 6 steps were done already, no checkpoint saved")


@pytest.mark.parametrize("micro_batches, needles", [
    (2, ("ended diverged (pruned: loss went non-finite",)),
    (4, ("ended slow (pruned: tokens/s far below the best so far); 50 tok/s",)),
    (8, ("ended crash (fail: the process died",)),
    (16, ("ended infeasible (pruned:", "never launched", "not divisible")),  # 8 / 16: never ran
    (None, ("no such trial in study 'x'",)),
])
def test_only_a_completed_trial_is_exported(harness, micro_batches, needles):
    space = harness.space("ends", {"train.micro_batches": [1, 2, 4, 8, 16]})
    harness.script([{"when": {"train.micro_batches": 2}, "do": "diverged"},
                    {"when": {"train.micro_batches": 4}, "do": "slow"},
                    {"when": {"train.micro_batches": 8}, "do": "crash"}])
    overrides = harness.overrides(space, "sweep.n_trials=5", "sweep.neighbours=true",
                                  "sweep.max_failure_rate=1.0", study="x")
    assert harness.main("sweep", *overrides)[0] == 0
    numbers = {t.params["train.micro_batches"]: t.number for t in harness.study("x").trials}
    number = numbers.get(micro_batches, 99)
    out = harness.tmp / "job"
    code, _, err = harness.main("export", *overrides, f"export.trial={number}",
                                f"export.out={out}")
    # Rule: export.trial names a completed trial; any other is refused in one line with how
    # it ended and the trials that can be exported (here the baseline alone), nothing written.
    assert_one_line_error(code, err, f"export.trial={number}", *needles,
                          f"trials that can be exported: {numbers[1]} ")
    assert not out.exists()
