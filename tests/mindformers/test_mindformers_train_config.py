"""MindFormers' PyNative TrainConfig judges ``mindformers_train.yaml`` (run in
.venv-mindformers: `make test-mindformers`).

Every export of the job shapes the static export is tested with is loaded by
``TrainConfig.load_from_yaml`` and checked by ``validate()``, and the recompute range by
MindFormers' own recompute validator. The PyNative trainer itself cannot run here: it
imports ``hyper_parallel`` (not on PyPI) and targets MindSpore 2.11 (README).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import mindformers
import pytest
import yaml
from mindformers.pynative.config import TrainConfig

from autotune.export.mindformers_train import export_train_config
from tests.mindformers.test_mindformers_accepts import EVERYTHING, JOBS, job
from trials.contract.schema import ConfigError

SHIPPED = Path(mindformers.__file__).resolve().parent.parent / "configs"
#: MindFormers' own PyNative pretraining config (DeepSeek-V3 1B: 16 layers of 1792).
DEEPSEEK_PYNATIVE = SHIPPED / "deepseek3" / "pretrain_deepseek3_1b_8p_pynative.yaml"
#: The recompute shape: one of the jobs, with full recompute.
SHAPES = {**JOBS, "cpu-recompute": ("train.recompute=full",)}


def load(tmp_path: Path, text: str) -> TrainConfig:
    path = tmp_path / "mindformers_train.yaml"
    path.write_text(text)
    config = TrainConfig.load_from_yaml(str(path))
    config.validate()
    return config


def recompute_validator(monkeypatch):
    """MindFormers' ``_validate_recompute_config``, from its own file: the module imports
    hyper_parallel's checkpoint wrappers at the top, which this validator never calls, so
    a stand-in module with those names lets it load (its package ``__init__`` needs far
    more of hyper_parallel, so the file is loaded alone)."""
    names = ("CheckpointPolicy", "checkpoint_exclude_wrapper", "checkpoint_wrapper",
             "swap_wrapper", "SwapManager")
    fake = types.ModuleType("hyper_parallel.core.activation_checkpoint")
    for name in names:
        setattr(fake, name, object())
    for parent in ("hyper_parallel", "hyper_parallel.core"):
        monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    path = SHIPPED.parent / "mindformers" / "pynative" / "distributed" / "activation_checkpoint.py"
    spec = importlib.util.spec_from_file_location("_mindformers_activation_checkpoint", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._validate_recompute_config


@pytest.mark.parametrize("name", SHAPES)
def test_every_fragment_loads_and_validates_as_a_train_config(tmp_path, monkeypatch, name):
    tuned = job(*SHAPES[name])
    config = load(tmp_path, export_train_config(tuned).yaml())
    p, t = tuned.parallel, tuned.train
    par, training = config.parallelism, config.training
    assert (par.tensor_parallel, par.pipeline_parallel) == (p.mp, p.pp)
    # The trainer's own arithmetic: accumulation = global / (dp x local).
    assert training.global_batch_size == t.global_batch
    assert training.global_batch_size // (p.dp * training.local_batch_size) == t.micro_batches
    assert training.max_norm == t.clip_norm and config.lr_scheduler.learning_rate == t.lr
    assert config.context.device_target == tuned.hardware.backend.value
    assert config.model.compute_dtype == tuned.precision.dtype.value
    assert config.recompute.mode == ("full" if t.recompute == "full" else "None")
    validate = recompute_validator(monkeypatch)
    validate(config.recompute, config.recompute_comm, tuned.workload.n_layers)


def test_a_shipped_pynative_config_takes_the_tuned_values(tmp_path):
    base = yaml.safe_load(DEEPSEEK_PYNATIVE.read_text())
    model = base["model"]
    # The tuned workload: the shipped model's dimensions, on Ascend, 8 devices.
    tuned = job("hardware=ascend_910b", "parallel.dp=4", "parallel.mp=2",
                "train.global_batch=16", "precision=bf16", "train.recompute=full",
                f"workload.n_layers={model['num_hidden_layers']}",
                f"workload.d_model={model['hidden_size']}",
                f"workload.n_heads={model['num_attention_heads']}",
                f"workload.seq_len={model['seq_length']}")
    export = export_train_config(tuned, base=str(DEEPSEEK_PYNATIVE))
    config = load(tmp_path, export.yaml())
    assert config.parallelism.tensor_parallel == 2 and config.parallelism.sequence_parallel
    assert config.model.model_type == "deepseek_v3" and config.model.n_routed_experts == 8
    assert config.recompute.full_recompute_layer == ["0-15"]
    assert config.lr_scheduler.type == "ConstantWarmUpLR" and config.lr_scheduler.learning_rate
    # The shipped config names no memory; MindFormers' default stays, not the profile's.
    assert config.context.max_device_memory == "59GB"


def test_a_mismatched_shipped_config_takes_only_what_is_named(tmp_path):
    cpu = job()
    with pytest.raises(ConfigError, match="its model has layers 16"):
        export_train_config(cpu, base=str(DEEPSEEK_PYNATIVE))
    export = export_train_config(cpu, base=str(DEEPSEEK_PYNATIVE), transfer=["data", "batch"])
    config = load(tmp_path, export.yaml())
    assert config.training.global_batch_size == cpu.train.global_batch
    assert config.train_dataset.prefetch_size == cpu.data.prefetch
    assert config.context.device_target == "Ascend"  # the hardware stays the base's
    assert config.parallelism.data_parallel_shard == -1  # parallel was not named
    assert config.model.compute_dtype == "bfloat16"
    everything = export_train_config(cpu, base=str(DEEPSEEK_PYNATIVE), transfer=EVERYTHING)
    assert load(tmp_path, everything.yaml()).context.device_target == "CPU"
