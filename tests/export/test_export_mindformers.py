"""mindformers.yaml: every tuned key at MindFormers' path with its semantics, merged into a
user's config on request, and refused when MindFormers would refuse it.

These run without MindFormers (the main environment); tests/mindformers/ loads the same
exports with MindFormers itself.
"""

from __future__ import annotations

import pytest
import yaml

from autotune.export.mindformers import changes_section, export_mindformers, fragment
from autotune.export.mindformers_train import export_train_config, train_fragment
from autotune.export.mindformers_transfer import group_of, leaves
from autotune.settings import MINDFORMERS_TRANSFER_GROUPS
from tests.conftest import ROOT
from trials.contract import mindformers as mf
from trials.contract.compose import compose
from trials.contract.schema import ConfigError, TrialConfig, to_trial_config


def job(*overrides: str) -> TrialConfig:
    return to_trial_config(compose("trial", list(overrides)))


#: Everything may transfer: the merge as it was before bases were checked.
EVERYTHING = list(MINDFORMERS_TRANSFER_GROUPS)


#: The parts of MindFormers' shipped general/llm_pretrain_dense_template.yaml that the
#: export touches (anchors as shipped: the dataset strategy repeats data_parallel).
SEMI_AUTO_BASE = """
use_legacy: False
use_parallel: True
run_mode: 'train'
train_dataset: &train_dataset
  input_columns: ["input_ids", "labels", "loss_mask", "position_ids", "attention_mask"]
  num_parallel_workers: 8
  python_multiprocessing: False
  prefetch_size: 1
train_dataset_task:
  type: CausalLanguageModelDataset
  dataset_config: *train_dataset
model:
  model_config:
    compute_dtype: "bfloat16"
    layernorm_compute_dtype: "float32"
    softmax_compute_dtype: "float32"
    params_dtype: "float32"
    num_hidden_layers: 8
    num_attention_heads: 8
optimizer: {type: AdamW, betas: [0.9, 0.95], eps: 1.e-8, weight_decay: 0.0}
lr_schedule: {type: CosineWithWarmUpLR, learning_rate: 1.e-6, lr_end: 1.e-6, warmup_ratio: 0}
parallel_config:
  data_parallel: &dp 2
  model_parallel: 2
  pipeline_stage: 2
  micro_batch_num: 2
parallel:
  parallel_mode: 1
  gradients_mean: False
  full_batch: False
  dataset_strategy: [[*dp, 1], [*dp, 1], [*dp, 1], [*dp, 1], [*dp, 1, 1, 1]]
context: {mode: 0, device_target: "Ascend", max_device_memory: "58GB"}
trainer: {type: CausalLanguageModelingTrainer, model_name: 'llm'}
runner_config: {epochs: 2, batch_size: 1}
runner_wrapper: {type: MFTrainOneStepCell, scale_sense: 1.0, use_clip_grad: True}
"""


def test_fragment_puts_every_knob_at_mindformers_path():
    f = fragment(job("train.lr=0.003", "train.clip_norm=0.5", "train.weight_decay=0.1"))
    assert "grad_clip" not in f and "learning_rate" not in f["optimizer"]
    assert f["runner_wrapper"] == {"type": "MFTrainOneStepCell", "use_clip_grad": True,
                                   "max_grad_norm": 0.5, "scale_sense": 1.0}
    assert f["lr_schedule"] == {"type": "ConstantWarmUpLR", "learning_rate": 0.003,
                                "warmup_steps": 0}
    assert f["optimizer"]["type"] == "AdamW" and f["optimizer"]["weight_decay"] == 0.1
    # One device: MindFormers' stand-alone mode, nothing to split.
    assert f["use_parallel"] is False and f["parallel"]["parallel_mode"] == mf.DATA_PARALLEL
    assert mf.problems(mf.merge({"model": {"model_config": {}}}, f)) == []


def test_dynamic_loss_scale_is_the_update_cell():
    f = fragment(job("precision=fp16"))
    assert f["runner_wrapper"]["scale_sense"]["type"] == "DynamicLossScaleUpdateCell"
    assert f["model"]["model_config"]["compute_dtype"] == "float16"


def test_split_and_accumulation_choose_use_parallel_and_mode():
    dp = fragment(job("parallel.dp=2", "runtime.threads=1"))
    assert dp["use_parallel"] is True and dp["parallel"] == {"parallel_mode": 0,
                                                             "gradients_mean": True}
    mp = fragment(job("hardware=gpu_a100", "parallel.mp=2", "workload=llama2_7b"))
    assert mp["parallel"]["parallel_mode"] == mf.SEMI_AUTO_PARALLEL
    assert mp["parallel"]["gradients_mean"] is False
    # Accumulation on a GPU: semi-auto, or MindFormers resets it to 1.
    acc = fragment(job("hardware=gpu_a100", "train.micro_batches=4", "train.global_batch=8"))
    assert acc["use_parallel"] is True and acc["parallel"]["parallel_mode"] == 1
    assert acc["runner_config"] == {"batch_size": 2, "gradient_accumulation_steps": 4}
    # The CPU cannot run semi-auto: the same global batch in one step.
    cpu = fragment(job("train.micro_batches=4", "train.global_batch=8"))
    assert cpu["use_parallel"] is False
    assert cpu["runner_config"] == {"batch_size": 8, "gradient_accumulation_steps": 1}
    pipe = fragment(job("hardware=gpu_a100", "parallel.pp=2", "train.micro_batches=4",
                        "train.global_batch=8"))
    assert pipe["parallel_config"]["micro_batch_num"] == 4
    assert pipe["runner_config"]["gradient_accumulation_steps"] == 1
    for f in (dp, mp, acc, cpu, pipe):
        assert mf.problems(mf.merge({"model": {"model_config": {}}}, f)) == [], f


def test_precision_keys_follow_the_model_config_style():
    legacy = fragment(job("precision=bf16", "hardware=gpu_a100"),
                      "legacy")["model"]["model_config"]
    assert legacy == {"compute_dtype": "bfloat16", "param_init_type": "float32",
                      "layernorm_compute_type": "float32", "softmax_compute_type": "float32"}
    # On the CPU the legacy model also needs the kernels the CPU has.
    cpu = fragment(job("precision=bf16"), "legacy")["model"]["model_config"]
    assert cpu == {**legacy, **mf.CPU_MODEL_KEYS}
    mcore = fragment(job("precision=bf16", "hardware=gpu_a100"), "mcore")["model"]["model_config"]
    assert set(mcore) == {"compute_dtype", "params_dtype", "layernorm_compute_dtype",
                          "softmax_compute_dtype"}


def test_merge_into_a_base_keeps_its_choices_and_fits_the_split(tmp_path):
    base = tmp_path / "pretrain.yaml"
    base.write_text(SEMI_AUTO_BASE)
    tuned = job("hardware=gpu_a100", "parallel.dp=4", "parallel.mp=2", "train.global_batch=16",
                "precision=fp16", "train.lr=0.0002")
    out = export_mindformers(tuned, base=str(base), transfer=EVERYTHING)
    cfg = out.config
    assert out.style == "mcore" and cfg["model"]["model_config"]["compute_dtype"] == "float16"
    assert "param_init_type" not in cfg["model"]["model_config"]
    # The dataset strategy follows the new data-parallel size, or MindFormers raises
    # "data_parallel 4 should be equal to dataset_strategy[0][0] 2".
    assert [s[0] for s in cfg["parallel"]["dataset_strategy"]] == [4] * 5
    assert cfg["parallel"]["dataset_strategy"][-1] == [4, 1, 1, 1]
    # The user's schedule and optimizer stay; only the tuned values change.
    assert cfg["lr_schedule"]["type"] == "CosineWithWarmUpLR"
    assert cfg["lr_schedule"]["learning_rate"] == 0.0002
    assert cfg["optimizer"]["betas"] == [0.9, 0.95]
    # A table over the base's number: MindFormers' own merge would crash here.
    assert cfg["runner_wrapper"]["scale_sense"]["type"] == "DynamicLossScaleUpdateCell"
    assert cfg["parallel_config"] == {"data_parallel": 4, "model_parallel": 2,
                                      "pipeline_stage": 1, "micro_batch_num": 1}
    assert cfg["trainer"]["type"] == "CausalLanguageModelingTrainer"  # untouched
    changed = {key: (old, new) for key, old, new in out.changes}
    assert changed["parallel_config.data_parallel"] == (2, 4)
    assert changed["context.device_target"] == ("Ascend", "GPU")
    assert "trainer.type" not in changed
    section = changes_section(out)
    assert "| `parallel_config.data_parallel` | 2 | 4 |" in section
    assert "amp_level" in section
    # The written YAML reads back to the same config.
    assert yaml.safe_load(out.yaml()) == cfg


def test_bad_bases_and_overrides_are_refused_with_one_line(tmp_path):
    cpu = job()
    not_mf = tmp_path / "job.yaml"
    not_mf.write_text("train: {lr: 0.1}\nparallel: {dp: 1}\n")
    with pytest.raises(ConfigError, match="is not a MindFormers config"):
        export_mindformers(cpu, base=str(not_mf))
    with pytest.raises(ConfigError, match="no such file"):
        export_mindformers(cpu, base=str(tmp_path / "missing.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot be read as YAML"):
        export_mindformers(cpu, base=str(broken))
    base = tmp_path / "base.yaml"
    base.write_text(SEMI_AUTO_BASE)
    pipe = job("hardware=gpu_a100", "parallel.pp=2", "train.micro_batches=2",
               "train.global_batch=4")
    with pytest.raises(ConfigError, match="micro_batch_num=1 is below pipeline_stage=2"):
        export_mindformers(pipe, base=str(base), transfer=EVERYTHING,
                           overrides={"parallel_config.micro_batch_num": 1})
    with pytest.raises(ConfigError, match="runner_config.stop_steps is not a MindFormers"):
        export_mindformers(cpu, overrides={"runner_config.stop_steps": 3})
    with pytest.raises(ConfigError, match="resets it to 1"):
        export_mindformers(cpu, overrides={"runner_config.gradient_accumulation_steps": 2})


def test_base_config_files_are_merged_as_mindformers_does(tmp_path):
    (tmp_path / "base.yaml").write_text(SEMI_AUTO_BASE)
    (tmp_path / "mine.yaml").write_text("base_config: base.yaml\nseed: 7\n"
                                        "runner_config: {epochs: 9}\n")
    cfg = mf.load_config(tmp_path / "mine.yaml", what="x")
    assert cfg["seed"] == 7 and cfg["runner_config"] == {"epochs": 9, "batch_size": 1}
    assert "base_config" not in cfg and cfg["trainer"]["model_name"] == "llm"


def test_the_adapter_names_what_it_cannot_build(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(SEMI_AUTO_BASE)
    assert "mcore" in mf.adapter_problem(mf.load_config(base, what="x"))
    legacy = yaml.safe_load(SEMI_AUTO_BASE)
    legacy["use_legacy"] = True
    legacy["model"]["arch"] = {"type": "GPT2LMHeadModel"}
    assert "GPT2LMHeadModel" in mf.adapter_problem(legacy)
    legacy["model"]["arch"] = {"type": "LlamaForCausalLM"}
    legacy["model"]["model_config"]["type"] = "LlamaConfig"
    assert mf.adapter_problem(legacy) is None


def export_cli(harness, *extra: str):
    from autotune.cli import main

    code = main(["export", *harness.overrides("mf", *extra)])
    out = harness.capsys.readouterr()
    return code, out.out, out.err


def test_export_command_merges_into_a_base_and_refuses_a_bad_one(harness, tmp_path):
    space = harness.space("mf", {"data.num_workers": [1, 2]})
    code, out, err = harness.run(space, "sweep.n_trials=1")
    assert code == 0, out + err
    llama = ROOT / "examples" / "mindformers" / "llama2_7b.yaml"
    # A 7B model on Ascend is not the tuned CPU model: its values are refused...
    refused = tmp_path / "refused"
    code, out, err = export_cli(harness, f"export.out={refused}",
                                f"export.mindformers_base={llama}")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "its model has layers 32" in err and "runs on Ascend" in err, err
    assert "export.mindformers_transfer=" in err and not refused.exists()
    # ...unless named: then only the named groups change, the hardware keys stay.
    good = tmp_path / "good"
    code, out, err = export_cli(harness, f"export.out={good}",
                                f"export.mindformers_base={llama}",
                                "export.mindformers_transfer=[data,memory,run]",
                                "export.checkpoint_every=50",
                                "export.mindformers_overrides={output_dir: /data/out}")
    assert code == 0, err
    config = yaml.safe_load((good / "mindformers.yaml").read_text())
    assert config["trainer"]["model_name"] == "llama2_7b"  # the whole config, not a fragment
    assert config["output_dir"] == "/data/out"
    assert config["context"]["device_target"] == "Ascend"
    assert config["context"]["max_device_memory"] == "58GB"
    assert config["parallel_config"]["data_parallel"] == 8 and config["use_parallel"] is True
    assert config["runner_config"]["batch_size"] == 1
    assert config["model"]["model_config"]["compute_dtype"] == "float16"
    assert config["model"]["model_config"]["use_flash_attention"] is True
    assert config["recompute_config"]["recompute"] is False  # memory: transferred
    changes = (good / "CHANGES.md").read_text()
    assert "| `train_dataset.prefetch_size` | 1 | 16 |" in changes
    # The task's dataset, the base's alias of train_dataset, says the same (it kept 1).
    assert config["train_dataset_task"]["dataset_config"]["prefetch_size"] == 16
    assert "| `output_dir` | ./output | /data/out |" in changes
    assert "parallel_config.data_parallel" not in changes.split("mindformers_train")[0]
    assert "kept as your config has them: batch, hardware, optimizer, parallel" in changes
    # The export's checkpoint interval reaches the user's CheckpointMonitor (run).
    monitor = [c for c in config["callbacks"] if c["type"] == "CheckpointMonitor"]
    assert monitor[0]["save_checkpoint_steps"] == 50 and monitor[0]["prefix"] == "llama2_7b"
    # Its TrainConfig twin is a fragment (the base is a static one), with the table, and
    # holds what the transfer named, too: not the CPU toy's model, device or batch.
    train = yaml.safe_load((good / "mindformers_train.yaml").read_text())
    assert set(train["training"]) == {"steps", "seed"}  # run: named
    assert "recompute" in train and "train_dataset" in train  # memory, data: named
    assert not {"model", "context", "parallelism", "optimizer"} & set(train)
    assert "only what export.mindformers_transfer names (data, memory, run)" in changes
    assert "| `parallel.mp` | `parallelism.tensor_parallel` | approximate |" in changes
    not_mf = tmp_path / "not_mf.yaml"
    not_mf.write_text("lr: 0.1\n")
    for override, message in [
            (f"export.mindformers_base={not_mf}", "is not a MindFormers config"),
            ("export.mindformers_overrides={runner_config.stop_steps: 3}",
             "runner_config.stop_steps is not a MindFormers 2.1.0 key"),
            ("export.mindformers_style=new", "export.mindformers_style=new must be one of"),
            ("export.mindformers_transfer=[data,hard-ware]", "'hard-ware' is neither a group"),
            (f"export.mindformers_base={llama}", "export.mindformers_transfer=[data,memory]"),
            ("export.mindformers_transfer=[no.such]", "'no.such' is no group")]:
        bad = tmp_path / "bad"
        code, out, err = export_cli(harness, f"export.out={bad}", override)
        assert code == 2, (override, out, err)
        assert message in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert not bad.exists()


def test_a_mindformers_workload_the_adapter_cannot_build_is_refused(harness, tmp_path):
    mcore = tmp_path / "qwen.yaml"
    mcore.write_text(SEMI_AUTO_BASE)
    space = harness.space("mfw", {"data.num_workers": [1, 2]})
    code, out, err = harness.run(space, "workload=mindformers_llama_tiny",
                                 f"workload.options.config={mcore}", fake=False)
    assert code == 2, out + err
    assert "the MindFormers workload cannot build it: its model is a new (mcore" in err
    assert len(err.strip().splitlines()) == 1 and not harness.runs.exists()
    legacy = yaml.safe_load(SEMI_AUTO_BASE)
    legacy.update(use_legacy=True)
    legacy["model"]["arch"] = {"type": "LlamaForCausalLM"}
    legacy["model"]["model_config"]["type"] = "LlamaConfig"
    (tmp_path / "legacy.yaml").write_text(yaml.safe_dump(legacy))
    code, out, err = harness.run(space, "workload=mindformers_llama_tiny",
                                 f"workload.options.config={tmp_path / 'legacy.yaml'}",
                                 "parallel.mp=3", fake=False)
    assert code == 2 and "not divisible by parallel.mp=3" in err, err


@pytest.mark.parametrize("overrides", [(), ("precision=fp16", "train.micro_batches=2"),
                                       ("hardware=ascend_910b", "parallel.mp=2",
                                        "parallel.pp=2", "train.micro_batches=4",
                                        "train.global_batch=16", "train.recompute=full")])
def test_every_tuned_key_belongs_to_a_transfer_group(overrides):
    tuned = job(*overrides)
    keys = list(leaves(fragment(tuned))) + list(leaves(train_fragment(tuned, layers=2)))
    # A key of no group could never be transferred by name, nor held back.
    assert [k for k in keys if group_of(k) not in MINDFORMERS_TRANSFER_GROUPS] == []


def test_same_model_and_device_merges_all_but_the_base_device_memory():
    llama = ROOT / "examples" / "mindformers" / "llama2_7b.yaml"
    tuned = job("workload=llama2_7b", "hardware=ascend_910b", "parallel.dp=4",
                "train.global_batch=16", "precision=bf16")
    out = export_mindformers(tuned, base=str(llama))
    cfg = out.config
    assert cfg["parallel_config"]["data_parallel"] == 4
    assert cfg["model"]["model_config"]["compute_dtype"] == "bfloat16"
    # The profile says 64 GiB; the base's own 58GB is a hardware key and stays.
    assert cfg["context"]["max_device_memory"] == "58GB"
    assert any("kept as your config has them: hardware" in n for n in out.notes)
    named = export_mindformers(tuned, base=str(llama), transfer=["context.max_device_memory"])
    assert named.config["context"]["max_device_memory"] == "64GB"
    assert named.config["parallel_config"]["data_parallel"] == 8  # only what was named


#: A PyNative TrainConfig as MindFormers ships them (configs/deepseek3/...pynative.yaml),
#: shrunk to what the export reads and writes.
TRAIN_BASE = """
training: {steps: 10, local_batch_size: 1, global_batch_size: 8, max_norm: 1.0, seed: 42}
optimizer: {type: AdamW, betas: [0.9, 0.95], eps: 1.e-8, weight_decay: 0.01}
lr_scheduler: {type: CosineWithWarmUpLR, learning_rate: 1.e-5, warmup_ratio: 0}
parallelism: {data_parallel_shard: -1, tensor_parallel: 1, pipeline_parallel: 1}
train_dataset:
  dataloader: {type: BlendedMegatronDatasetDataLoader, python_multiprocessing: false}
  num_parallel_workers: 8
  prefetch_size: 1
model: {model_type: qwen3, architectures: Qwen3ForCausalLM, num_hidden_layers: 4,
        hidden_size: 256, num_attention_heads: 4, seq_length: 128, compute_dtype: bfloat16}
"""


def test_a_train_config_base_gets_the_tuned_values_or_is_refused(tmp_path):
    base = tmp_path / "train.yaml"
    base.write_text(TRAIN_BASE)
    cpu = job()  # gpt_small: 4 layers of 256, 4 heads, 128 tokens, like the base
    # The base names no device: MindFormers' default, Ascend, is not the tuned CPU.
    with pytest.raises(ConfigError, match="runs on Ascend where the values were tuned on CPU"):
        export_train_config(cpu, base=str(base))
    (tmp_path / "cpu.yaml").write_text(TRAIN_BASE + "context: {device_target: CPU}\n")
    out = export_train_config(cpu, base=str(tmp_path / "cpu.yaml"))
    cfg = out.config
    assert cfg["training"]["global_batch_size"] == 8 and cfg["training"]["steps"] == 100
    assert cfg["parallelism"]["data_parallel_shard"] == 1
    assert cfg["model"]["model_type"] == "qwen3" and cfg["model"]["compute_dtype"] == "float32"
    assert cfg["lr_scheduler"] == {"type": "CosineWithWarmUpLR", "learning_rate": 0.001,
                                   "warmup_ratio": 0}
    assert cfg["train_dataset"]["prefetch_size"] == 16
    # The static file is then the fragment, and says why.
    static = export_mindformers(cpu, base=str(tmp_path / "cpu.yaml"))
    assert static.base is None and "PyNative TrainConfig" in static.notes[0]
    data_only = export_train_config(cpu, base=str(base), transfer=["data"])
    assert {k.split(".")[0] for k, _, _ in data_only.changes} == {"train_dataset"}
