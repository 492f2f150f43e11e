"""MindFormers itself judges what autotune exports (run in .venv-mindformers: `make
test-mindformers`; CI runs them).

Every exported YAML is loaded with ``MindFormerConfig`` (which raises on an unknown key of
its strict sections), its parallel config is built with MindFormers' own builder, the
fragment is merged into two of MindFormers' shipped configs by MindFormers' own
``base_config`` merge, and a swept MindFormers workload's export trains for 3 steps on the
CPU through MindFormers' Trainer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mindformers
import pytest
import yaml
from mindformers import MindFormerConfig
from mindformers.core.parallel_config import build_parallel_config
from mindformers.modules.transformer import TransformerOpParallelConfig
from mindformers.tools.register import template

from autotune.export.mindformers import export_mindformers
from autotune.settings import MINDFORMERS_TRANSFER_GROUPS
from tests.conftest import ROOT, project_env
from trials.contract import mindformers as mf
from trials.contract.compose import compose
from trials.contract.schema import TrialConfig, to_trial_config

SHIPPED = Path(mindformers.__file__).resolve().parent.parent / "configs"
DENSE_TEMPLATE = SHIPPED / "general" / "llm_pretrain_dense_template.yaml"
QWEN3 = SHIPPED / "qwen3" / "pretrain_qwen3_32b_4k.yaml"
LLAMA = ROOT / "examples" / "mindformers" / "llama2_7b.yaml"

#: Jobs covering every branch of the translation: devices, split, accumulation, precision.
JOBS = {
    "cpu": (),
    "cpu-accumulate-fp16": ("precision=fp16", "train.micro_batches=2"),
    "cpu-dp2": ("parallel.dp=2", "runtime.threads=1"),
    "gpu-dp8-bf16": ("hardware=gpu_a100", "parallel.dp=8", "precision=bf16"),
    "gpu-accumulate": ("hardware=gpu_a100", "train.micro_batches=4", "train.global_batch=16"),
    "ascend-mp2-pp2": ("hardware=ascend_910b", "parallel.mp=2", "parallel.pp=2",
                       "train.micro_batches=4", "train.global_batch=16", "workload=llama2_7b"),
}


#: Everything may transfer: these tests put every job into every base on purpose.
EVERYTHING = list(MINDFORMERS_TRANSFER_GROUPS)


def job(*overrides: str) -> TrialConfig:
    return to_trial_config(compose("trial", list(overrides)))


def load(tmp_path: Path, name: str, text: str) -> MindFormerConfig:
    path = tmp_path / name
    path.write_text(text)
    return MindFormerConfig(str(path))


def test_the_strict_sections_are_mindformers_own():
    for section, keys in mf.STRICT_SECTIONS.items():
        cls = template.CONFIG_NAME_TO_CLASS[section]
        assert sorted(cls.keys()) == sorted(keys), section
        with pytest.raises(KeyError, match="unexpected key"):
            cls.apply({"not_a_key": 1})


@pytest.mark.parametrize("name", JOBS)
@pytest.mark.parametrize("base", [None, LLAMA, DENSE_TEMPLATE, QWEN3],
                         ids=["fragment", "llama2_7b", "dense_template", "qwen3"])
def test_every_export_loads_and_builds_its_parallel_config(tmp_path, name, base):
    tuned = job(*JOBS[name])
    export = export_mindformers(tuned, base=str(base) if base else "", transfer=EVERYTHING)
    cfg = load(tmp_path, "mindformers.yaml", export.yaml())
    wrapper = cfg.runner_wrapper
    assert wrapper.use_clip_grad is True and wrapper.max_grad_norm == tuned.train.clip_norm
    assert cfg.lr_schedule.learning_rate == tuned.train.lr and cfg.optimizer.type
    assert cfg.model.model_config.compute_dtype == tuned.precision.dtype.value
    assert cfg.use_parallel is (tuned.parallel.devices > 1 or
                                export.config["parallel"].get("parallel_mode") == 1)
    build_parallel_config(cfg)
    pc = cfg.parallel_config
    assert isinstance(pc, TransformerOpParallelConfig)
    assert (pc.data_parallel, pc.model_parallel, pc.pipeline_stage) == (
        tuned.parallel.dp, tuned.parallel.mp, tuned.parallel.pp)
    assert pc.micro_batch_num == (tuned.train.micro_batches if tuned.parallel.pp > 1 else 1)
    assert cfg.recompute_config.recompute is (tuned.train.recompute == "full")


@pytest.mark.parametrize("shipped", [DENSE_TEMPLATE, QWEN3], ids=["dense_template", "qwen3"])
def test_the_fragment_merges_into_shipped_configs_by_mindformers_merge(tmp_path, shipped):
    tuned = job("hardware=ascend_910b", "parallel.dp=4", "parallel.mp=2",
                "train.global_batch=16", "precision=bf16", "train.lr=0.0002")
    fragment = export_mindformers(tuned, style="mcore").config
    cfg = load(tmp_path, "mine.yaml", yaml.safe_dump({"base_config": str(shipped),
                                                      **fragment}))
    assert cfg.lr_schedule.learning_rate == 0.0002
    assert cfg.lr_schedule.type == "ConstantWarmUpLR"
    assert cfg.runner_wrapper.max_grad_norm == 1.0 and cfg.runner_wrapper.scale_sense == 1.0
    assert cfg.parallel_config.data_parallel == 4 and cfg.parallel_config.model_parallel == 2
    assert cfg.model.model_config.params_dtype == "float32"
    assert cfg.model.model_config.compute_dtype == "bfloat16"
    assert cfg.trainer.type == "CausalLanguageModelingTrainer"  # the shipped config's own


def test_mindformers_merge_cannot_put_the_loss_scale_cell_over_a_number(tmp_path):
    """Why the export README tells fp16 users to let autotune merge."""
    fragment = export_mindformers(job("precision=fp16", "hardware=ascend_910b"),
                                  style="mcore").config
    assert isinstance(fragment["runner_wrapper"]["scale_sense"], dict)
    with pytest.raises(AttributeError, match="'float' object has no attribute 'copy'"):
        load(tmp_path, "mine.yaml", yaml.safe_dump({"base_config": str(DENSE_TEMPLATE),
                                                    **fragment}))
    merged = export_mindformers(job("precision=fp16", "hardware=ascend_910b"),
                                base=str(DENSE_TEMPLATE), transfer=EVERYTHING)
    cfg = load(tmp_path, "merged.yaml", merged.yaml())
    assert cfg.runner_wrapper.scale_sense.type == "DynamicLossScaleUpdateCell"


def autotune(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=ROOT,
                          env=project_env(), capture_output=True, text=True, timeout=timeout)


def test_a_swept_mindformers_workload_exports_a_config_mindformers_trains(tmp_path):
    """The README's path: sweep the MindFormers workload, export, train with MindFormers."""
    common = ["workload=mindformers_llama_tiny", "search=tiny", "sweep.study=mf",
              f"sweep.runs_dir={tmp_path / 'runs'}", "sweep.progress=false",
              "run.warmup_steps=1", "run.measure_steps=3"]
    sweep = autotune("sweep", *common, "sweep.n_trials=2", "sweep.stop.slow_ratio=0",
                     "sweep.stop.slow_warmup_ratio=0")
    assert sweep.returncode == 0, sweep.stdout[-2000:] + sweep.stderr[-2000:]
    assert sweep.stdout.count(" ok ") >= 2, sweep.stdout[-2000:]
    out = tmp_path / "export"
    export = autotune("export", *common, f"export.out={out}")
    assert export.returncode == 0, export.stderr
    config = yaml.safe_load((out / "mindformers.yaml").read_text())
    # The model as the trials built it, in the user's config.
    assert config["model"]["arch"]["type"] == "LlamaForCausalLM"
    assert config["model"]["model_config"]["num_layers"] == 2
    assert config["trainer"]["model_name"] == "llama2_7b"
    assert "model.model_config.num_layers" in (out / "CHANGES.md").read_text()
    train = subprocess.run([sys.executable, "-m", "trials.mindformers_run",
                            str(out / "mindformers.yaml"), "--steps", "3",
                            "--synthetic-data"], cwd=tmp_path, env=project_env(),
                           capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stdout[-2000:] + train.stderr[-2000:]
    losses = [line for line in train.stdout.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in losses] == ["step 1", "step 2", "step 3"]
    assert "trained 3 steps" in train.stdout


@pytest.mark.parametrize("config, message", [
    (QWEN3, "new (mcore, use_legacy: False) MindFormers model"),
    (ROOT / "conf" / "trial.yaml", "is not a MindFormers config"),
])
def test_the_adapter_refuses_what_it_cannot_build(tmp_path, config, message):
    proc = autotune("sweep", "workload=mindformers_llama_tiny",
                    f"workload.options.config={config}", "sweep.study=bad",
                    f"sweep.runs_dir={tmp_path / 'runs'}")
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_the_runner_refuses_what_mindformers_would_reject(tmp_path):
    export = export_mindformers(job(), base=str(LLAMA), transfer=EVERYTHING)
    config = export.config
    config["parallel_config"].update(pipeline_stage=2, micro_batch_num=1)
    config["use_parallel"] = True
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "trials.mindformers_run", str(path)],
                          cwd=tmp_path, env=project_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "micro_batch_num=1 is below pipeline_stage=2" in proc.stderr


def test_the_runner_names_the_fix_for_data_that_is_not_there(tmp_path):
    """An export's config names a dataset at the base's path (/path/to/...): without
    --synthetic-data the run stops at once with the two ways on, not MindFormers' error."""
    export = export_mindformers(job(), base=str(LLAMA), transfer=EVERYTHING)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(export.config))
    proc = subprocess.run([sys.executable, "-m", "trials.mindformers_run", str(path)],
                          cwd=tmp_path, env=project_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "does not exist" in proc.stderr and "--synthetic-data" in proc.stderr
    assert "Traceback" not in proc.stderr
