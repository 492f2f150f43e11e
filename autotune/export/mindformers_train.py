"""The tuned job in the schema of MindFormers' PyNative trainer (``mindformers_train.yaml``).

MindFormers 2.1.0 has a second configuration path beside the static-graph YAML:
``mindformers.pynative.config.TrainConfig``, dataclasses loaded by
``TrainConfig.load_from_yaml`` and checked by ``validate()`` (unknown keys of its strict
sections and wrong types raise). Its trainer derives the data-parallel size from the
world size (``world_size / (tensor_parallel * pipeline_parallel * context_parallel)``) and
the accumulation steps from ``global_batch_size / (data_parallel * local_batch_size)``.
:data:`FIDELITY` says, knob by knob, how faithfully this file carries what autotune
measured. Given a TrainConfig YAML as ``export.mindformers_base``, the file is that config
with the tuned values merged in (what :mod:`.mindformers_transfer` lets in).
"""

from __future__ import annotations

from pathlib import Path

from autotune.export.mindformers import MindFormersExport, table_cell
from autotune.export.mindformers_transfer import Transfer, check_transfer, leaves
from autotune.presentation.labels import counted
from trials.contract import mindformers as mf
from trials.contract.schema import (
    Backend,
    LossScale,
    Mode,
    TrialConfig,
    micro_batch_size,
)
from trials.contract.vocabulary import Recompute

#: What a fragment cannot know: the PyNative trainer builds only MindFormers' own mcore
#: models (Qwen3, DeepSeek-V3/V4), and its data loader is the user's.
PLACEHOLDER = "SET-ME"

#: The export README's paragraph on the file.
TRAIN_README = """
- `mindformers_train.yaml`: the same job in the schema of MindFormers' PyNative trainer
  (`mindformers.pynative.config.TrainConfig.load_from_yaml`); CHANGES.md's table says knob
  by knob how faithfully it carries what was measured. That trainer needs MindFormers'
  `hyper_parallel` package and MindSpore 2.11 (see autotune's README).
"""

EXACT, APPROXIMATE, NONE = "exact", "approximate", "not expressible"

#: (autotune knob, TrainConfig key, fidelity, why): the table CHANGES.md prints.
FIDELITY = (
    ("parallel.dp", "world size (msrun workers) / (tp x pp x cp); "
     "`parallelism.data_parallel_shard: 1`", EXACT,
     "MindFormers derives data_parallel from the worker count; shard 1 replicates the "
     "model as autotune's data parallel does (-1 would shard it, FSDP)"),
    ("parallel.mp", "`parallelism.tensor_parallel`", APPROXIMATE,
     "above 1 MindFormers requires `sequence_parallel: true`, which the trials did not run"),
    ("parallel.pp", "`parallelism.pipeline_parallel`", EXACT,
     "schedule 1f1b, MindFormers' default"),
    ("train.micro_batches", "`training.global_batch_size / (dp x local_batch_size)`; "
     "`parallelism.pipeline_parallel_microbatch_size`", EXACT,
     "MindFormers derives the accumulation (pipeline micro-batch) count from the batches"),
    ("train.global_batch", "`training.global_batch_size`, `training.local_batch_size`", EXACT,
     "local = global / (dp x micro_batches)"),
    ("train.lr", "`lr_scheduler.learning_rate`", EXACT,
     "ConstantWarmUpLR without warm-up in a fragment; your schedule type stays"),
    ("train.weight_decay", "`optimizer.weight_decay`", EXACT,
     "AdamW with autotune's betas (0.9, 0.999) and eps 1e-6; your optimizer type stays"),
    ("train.clip_norm", "`training.max_norm`", EXACT, ""),
    ("train.seed", "`training.seed`", EXACT, ""),
    ("train.recompute", "`recompute.mode` (`None`/`full`), `recompute.full_recompute_layer`",
     EXACT, "full = every layer (`0-<layers-1>`)"),
    ("precision (dtype)", "`model.compute_dtype`, `params_dtype`, `layernorm_compute_dtype`, "
     "`softmax_compute_dtype`", EXACT, "norms and softmax in float32, parameters float32"),
    ("precision.amp_level", "-", NONE, "the model casts by its own compute dtype"),
    ("precision.loss_scale", "`training.use_skip_step_on_nan`", APPROXIMATE,
     "TrainConfig has no loss scale; a dynamic scale's skip of non-finite steps is kept, "
     "its scaling is not"),
    ("runtime.mode", "`context.mode: 1`", APPROXIMATE,
     "the trainer runs PyNative; a graph-mode job's mode is not expressible here "
     "(mindformers.yaml carries it)"),
    ("runtime.jit_level, memory_optimize_level, threads", "-", NONE,
     "ContextConfig takes mode, device_target and max_device_memory only"),
    ("data.num_workers", "`train_dataset.num_parallel_workers`", EXACT, ""),
    ("data.prefetch", "`train_dataset.prefetch_size`", EXACT, ""),
    ("data.multiprocessing", "`train_dataset.dataloader.python_multiprocessing`", EXACT, ""),
    ("data.source", "`train_dataset.dataloader`", NONE, "the data loader is your config's"),
    ("hardware.backend, device_memory_gib", "`context.device_target`, "
     "`context.max_device_memory`", EXACT,
     "a base's own are kept unless export.mindformers_transfer names hardware"),
    ("export.steps, checkpoint_every", "`training.steps`, "
     "`checkpoint.save_interleaved_steps`", EXACT, ""),
)


class TrainConfigExport(MindFormersExport):
    """What ``mindformers_train.yaml`` holds and how it came about (``base``: the user's
    TrainConfig YAML it was merged into; None: a fragment)."""

    def head(self) -> str:
        if self.base is None:
            return (f"# The tuned job in MindFormers {mf.MINDFORMERS_VERSION}'s PyNative "
                    "TrainConfig schema (mindformers.pynative.config.TrainConfig).\n"
                    f"# {PLACEHOLDER} marks what the tuning cannot know (your model_type, "
                    "architectures, data loader):\n"
                    "#   python -m autotune export export.mindformers_base=YOUR_train.yaml\n"
                    "# writes your TrainConfig with the tuned values merged in instead.\n")
        return (f"# {self.base.name} with the tuned values of autotune merged in "
                f"(MindFormers {mf.MINDFORMERS_VERSION} PyNative TrainConfig); CHANGES.md "
                "lists each change.\n")


def train_fragment(job: TrialConfig, *, layers: int) -> dict:
    """The tuned and fixed knobs of ``job`` under TrainConfig's keys (``layers``: the
    model's, for the recompute layer range)."""
    p, t, pr = job.parallel, job.train, job.precision
    keys = mf.PRECISION_KEYS["mcore"]
    context = {"mode": 1, "device_target": job.hardware.backend.value}
    if job.hardware.backend is not Backend.CPU:
        context["max_device_memory"] = f"{job.hardware.device_memory_gib:g}GB"
    recompute = ({"mode": "full", "full_recompute_layer": [f"0-{layers - 1}"]}
                 if t.recompute is Recompute.full else {"mode": "None"})
    training = {"steps": job.run.steps, "local_batch_size": micro_batch_size(job),
                "global_batch_size": t.global_batch, "max_norm": t.clip_norm, "seed": t.seed}
    if pr.loss_scale is LossScale.dynamic:
        training["use_skip_step_on_nan"] = True
    return {
        "training": training,
        "parallelism": {"data_parallel_shard": 1, "tensor_parallel": p.mp,
                        # MindFormers refuses PyNative tensor parallel without it.
                        "sequence_parallel": p.mp > 1, "context_parallel": 1,
                        "pipeline_parallel": p.pp,
                        "pipeline_parallel_microbatch_size": t.micro_batches},
        "recompute": recompute,
        "model": {keys["compute"]: pr.dtype.value, keys["params"]: "float32",
                  keys["layernorm"]: "float32", keys["softmax"]: "float32"},
        "optimizer": {"type": "AdamW", "betas": [0.9, 0.999], "eps": 1.0e-6,
                      "weight_decay": t.weight_decay},
        "lr_scheduler": {"type": "ConstantWarmUpLR", "learning_rate": t.lr,
                         "warmup_ratio": 0.0},
        "train_dataset": {"num_parallel_workers": job.data.num_workers,
                          "prefetch_size": job.data.prefetch,
                          "dataloader": {"python_multiprocessing":
                                         bool(job.data.multiprocessing)}},
        "context": context,
        "checkpoint": {"save_interleaved_steps": job.run.checkpoint_every},
    }


def _workload_model(job: TrialConfig) -> dict:
    """A fragment's model section: placeholders and the tuned workload's dimensions."""
    w = job.workload
    return {"model_type": PLACEHOLDER, "architectures": PLACEHOLDER,
            "num_hidden_layers": w.n_layers, "hidden_size": w.d_model,
            "num_attention_heads": w.n_heads, "num_key_value_heads": w.n_kv_heads,
            "intermediate_size": w.ffn, "seq_length": w.seq_len, "vocab_size": w.vocab_size}


def export_train_config(job: TrialConfig, *, base: str = "",
                        transfer: list | None = None) -> TrainConfigExport:
    """``mindformers_train.yaml`` of the job: a fragment, or ``base`` (a TrainConfig YAML)
    with the tuned values merged in."""
    what = "export.mindformers_base"
    kind, base_cfg = mf.load_any(base, what=what) if base else (None, None)
    if kind != mf.PYNATIVE:
        config = mf.merge(train_fragment(job, layers=job.workload.n_layers),
                          {"model": _workload_model(job),
                           "train_dataset": {"dataloader": {"type": PLACEHOLDER}}})
        notes = [f"a fragment: {PLACEHOLDER} marks the keys your TrainConfig supplies; "
                 "export.mindformers_base=YOUR_train.yaml merges into it."]
        if base and transfer:  # a static base: the fragment holds what it let in, too
            config = Transfer([], tuple(transfer)).select(config, {})
            notes.append(f"only what export.mindformers_transfer names "
                         f"({', '.join(transfer)}), as in mindformers.yaml")
        return TrainConfigExport(config, None, "mcore", notes=notes)
    layers = mf.model_dims(base_cfg["model"]).get("layers", job.workload.n_layers)
    tuned = _fit_to_base(train_fragment(job, layers=layers), base_cfg)
    gate = check_transfer(job, base_cfg, mf.PYNATIVE, transfer=list(transfer or []),
                          what=f"{what}={base}")
    config = mf.merge(base_cfg, gate.select(tuned, base_cfg))
    before, after = leaves(base_cfg), leaves(config)
    changes = [(k, before.get(k), v) for k, v in after.items() if before.get(k) != v]
    return TrainConfigExport(config, Path(base), "mcore", changes, gate.notes)


def _fit_to_base(tuned: dict, base: dict) -> dict:
    """The base's schedule and optimizer types stay (only the rate and the weight decay
    are tuned), as in the static export."""
    if isinstance(base.get("lr_scheduler"), dict) and base["lr_scheduler"].get("type"):
        tuned["lr_scheduler"] = {"learning_rate": tuned["lr_scheduler"]["learning_rate"]}
    if isinstance(base.get("optimizer"), dict) and base["optimizer"].get("type"):
        tuned["optimizer"] = {"weight_decay": tuned["optimizer"]["weight_decay"]}
    return tuned


def train_changes_section(export: TrainConfigExport, job: TrialConfig) -> str:
    """CHANGES.md's part on ``mindformers_train.yaml``: changes, notes, fidelity."""
    lines = ["", "## MindFormers PyNative TrainConfig (`mindformers_train.yaml`)", ""]
    if export.base is None:
        lines.append("The tuned keys in `TrainConfig`'s schema (a fragment).")
    else:
        lines += [f"`{export.base}` with the tuned values merged in "
                  f"({counted(len(export.changes), 'key')} changed):", "",
                  "| key | your config | exported |", "|---|---|---|"]
        lines += [f"| `{k}` | {table_cell(old)} | {table_cell(new)} |"
                  for k, old, new in export.changes]
    notes = list(export.notes)
    if job.runtime.mode is Mode.graph:
        notes.append("runtime.mode=graph: the PyNative trainer runs PyNative (context.mode 1); "
                     "the static mindformers.yaml keeps graph mode.")
    lines += [""] + [f"- {note}" for note in notes]
    lines += ["", "| autotune knob | TrainConfig key | fidelity | why |", "|---|---|---|---|"]
    lines += [f"| `{knob}` | {key} | {fidelity} | {why} |"
              for knob, key, fidelity, why in FIDELITY]
    return "\n".join(lines) + "\n"

