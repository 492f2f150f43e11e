"""The tuned job under MindFormers' YAML keys: a fragment, or the user's own config with
the tuned values merged in (``export.mindformers_base=FILE``).

Every key is written where MindFormers 2.1.0 reads it, with its semantics:

* clipping is the wrapper's ``use_clip_grad`` / ``max_grad_norm`` (``grad_clip`` is not
  a MindFormers key);
* the learning rate is ``lr_schedule.learning_rate`` (MindFormers builds the optimizer's
  rate from the schedule, so ``optimizer.learning_rate`` never reaches the run);
* accumulation needs ``use_parallel: True`` and semi-auto parallel, or MindFormers resets
  it to 1; a single-device CPU job keeps the global batch in one step instead;
* precision goes under the model's own keys, which legacy and new (mcore) model configs
  name differently.

Knobs with no faithful MindFormers key are not written; :func:`unfaithful` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autotune.export.mindformers_transfer import check_names, check_transfer
from autotune.presentation.labels import counted
from trials.contract import mindformers as mf
from trials.contract.schema import (
    Backend,
    ConfigError,
    LossScale,
    Mode,
    TrialConfig,
    accumulation_steps,
    micro_batch_size,
)
from trials.contract.vocabulary import Recompute


@dataclass
class MindFormersExport:
    """What ``mindformers.yaml`` holds and how it came about."""

    config: dict
    #: The user's config it was merged into (None: a fragment of the tuned keys).
    base: Path | None
    style: str
    #: (dotted key, value in the base or None, exported value) of every key changed.
    changes: list[tuple[str, object, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def head(self) -> str:
        if self.base is None:
            return (f"# MindFormers {mf.MINDFORMERS_VERSION} keys of the tuned job ({self.style} "
                    "model config). Merge it into your full config:\n"
                    "#   python -m autotune export export.mindformers_base=YOUR.yaml\n"
                    "# writes the merged, complete config instead (see README.md).\n")
        return (f"# {self.base.name} with the tuned values of autotune merged in "
                f"(MindFormers {mf.MINDFORMERS_VERSION}); CHANGES.md lists each change.\n")

    def yaml(self) -> str:
        return self.head() + yaml.safe_dump(self.config, sort_keys=False,
                                            default_flow_style=None)


def fragment(job: TrialConfig, style: str = "legacy") -> dict:
    """The tuned and fixed knobs of ``job`` under MindFormers' keys."""
    p, t, pr = job.parallel, job.train, job.precision
    cpu = job.hardware.backend is Backend.CPU
    accumulation = accumulation_steps(job)
    # MindFormers accumulates only under semi-auto parallel, which a CPU cannot run.
    folds_accumulation = accumulation > 1 and cpu
    semi_auto = p.mp > 1 or p.pp > 1 or (accumulation > 1 and not folds_accumulation)
    use_parallel = p.devices > 1 or semi_auto
    keys = mf.PRECISION_KEYS[style]
    context = {"mode": 0 if job.runtime.mode is Mode.graph else 1,
               "device_target": job.hardware.backend.value,
               "memory_optimize_level": job.runtime.memory_optimize_level.value,
               "jit_config": {"jit_level": job.runtime.jit_level.value}}
    if not cpu:
        context["max_device_memory"] = f"{job.hardware.device_memory_gib:g}GB"
    return {
        "seed": t.seed,
        "use_parallel": use_parallel,
        "context": context,
        "parallel": {"parallel_mode": mf.SEMI_AUTO_PARALLEL if semi_auto else mf.DATA_PARALLEL,
                     # MindFormers' convention: mean in data parallel, sum in semi-auto.
                     "gradients_mean": not semi_auto},
        "parallel_config": {"data_parallel": p.dp, "model_parallel": p.mp,
                            "pipeline_stage": p.pp,
                            "micro_batch_num": t.micro_batches if p.pp > 1 else 1},
        "recompute_config": {"recompute": t.recompute is Recompute.full},
        "runner_config": {
            "batch_size": micro_batch_size(job) * (accumulation if folds_accumulation else 1),
            "gradient_accumulation_steps": 1 if folds_accumulation else accumulation},
        "model": {"model_config": {keys["compute"]: pr.dtype.value,
                                   keys["params"]: "float32",
                                   keys["layernorm"]: "float32",
                                   keys["softmax"]: "float32",
                                   **(mf.CPU_MODEL_KEYS if cpu and style == "legacy" else {})}},
        "runner_wrapper": {"type": "MFTrainOneStepCell", "use_clip_grad": True,
                           "max_grad_norm": t.clip_norm, "scale_sense": _scale_sense(job)},
        # autotune trains with nn.AdamWeightDecay: betas (0.9, 0.999), eps 1e-6.
        "optimizer": {"type": "AdamW", "betas": [0.9, 0.999], "eps": 1.0e-6,
                      "weight_decay": t.weight_decay},
        "lr_schedule": {"type": "ConstantWarmUpLR", "learning_rate": t.lr, "warmup_steps": 0},
        "train_dataset": {"num_parallel_workers": job.data.num_workers,
                          "python_multiprocessing": bool(job.data.multiprocessing),
                          "prefetch_size": job.data.prefetch},
    }


def _scale_sense(job: TrialConfig):
    pr = job.precision
    if pr.loss_scale is LossScale.dynamic:
        return {"type": "DynamicLossScaleUpdateCell", "loss_scale_value": pr.init_scale,
                "scale_factor": pr.scale_factor, "scale_window": pr.scale_window}
    if pr.loss_scale is LossScale.static:
        return float(pr.init_scale)
    return 1.0


def unfaithful(job: TrialConfig, *, merged: bool) -> list[str]:
    """The knobs the MindFormers config cannot carry as autotune measured them."""
    notes = [
        f"precision.amp_level={job.precision.amp_level}: MindFormers models cast by their "
        "own compute dtype (matmuls in compute_dtype, norms and softmax in float32); there "
        "is no amp level key.",
        "run.steps: MindFormers trains runner_config.epochs over its dataset; set the "
        "epochs there." + ("" if merged else " run.checkpoint_every is the "
                           "CheckpointMonitor callback's save_checkpoint_steps (set in a "
                           "merged config)."),
        f"data.source={job.data.source.value}: the data is your config's train_dataset; only "
        "its worker, multiprocessing and prefetch settings are tuned values.",
    ]
    if job.runtime.threads:
        notes.append(f"runtime.threads={job.runtime.threads}: CPU operator threads have no "
                     "MindFormers key.")
    if accumulation_steps(job) > 1 and job.hardware.backend is Backend.CPU:
        notes.append(f"train.micro_batches={job.train.micro_batches} (gradient accumulation): "
                     "MindFormers accumulates only under semi-auto parallel, which the CPU "
                     "cannot run, so runner_config.batch_size holds the whole per-device batch "
                     "in one step: the same global batch, more activation memory.")
    if job.precision.loss_scale is LossScale.dynamic and not merged:
        notes.append("runner_wrapper.scale_sense is a DynamicLossScaleUpdateCell table: "
                     "MindFormers' own merge (base_config) cannot put a table over the "
                     "scale_sense: 1.0 of its shipped configs; replace that key by hand, or "
                     "let autotune merge (export.mindformers_base=YOUR.yaml).")
    return notes


def export_mindformers(job: TrialConfig, *, base: str = "", style: str = "auto",
                       overrides: dict | None = None,
                       transfer: list | None = None) -> MindFormersExport:
    """``mindformers.yaml`` of the job: the fragment, or ``base`` with it merged in, with
    ``overrides`` (dotted MindFormers keys) last; checked against MindFormers' rules.

    A base of another model or hardware takes only what ``transfer`` names
    (autotune/export/mindformers_transfer.py); a PyNative TrainConfig base leaves this
    file a fragment (mindformers_train.yaml is then the merged one)."""
    overrides = dict(overrides or {})
    check_names(list(transfer or []))
    what, base_cfg, built, notes = "export.mindformers_base", None, None, []
    workload_config = (job.workload.options.get(mf.OPTION_CONFIG, "")
                       if job.workload.entry == mf.ADAPTER_ENTRY else "")
    if workload_config and base in ("", workload_config):
        # A MindFormers workload: its own config is the natural base, with the model as
        # the trials built it (the workload's keys over the config's), on their hardware.
        base, what = workload_config, "workload.options.config"
        base_cfg, built = mf.workload_model_config(job.workload)
        notes.append(_trial_hardware_note(job, base_cfg))
    elif base:
        kind, base_cfg = mf.load_any(base, what=what)
        if kind == mf.PYNATIVE:
            notes.append(f"{base} is a PyNative TrainConfig: mindformers_train.yaml is it with "
                         "the tuned values merged in; this file is the static-graph fragment.")
            base, base_cfg = "", None
    if style == "auto":
        style = mf.model_style(base_cfg) if base_cfg is not None else "legacy"
    tuned = fragment(job, style)
    if base_cfg is None:
        config = mf.merge(tuned, _nest(overrides))
        result = MindFormersExport(config, None, style)
        checked = mf.merge(_minimal_model(), config)
    else:
        if built is not None:
            tuned["model"]["model_config"] = {**built, **tuned["model"]["model_config"]}
        tuned = _fit_to_base(tuned, base_cfg, checkpoint_every=job.run.checkpoint_every)
        if built is None:
            gate = check_transfer(job, base_cfg, mf.STATIC, transfer=list(transfer or []),
                                  what=f"{what}={base}")
            tuned = gate.select(tuned, base_cfg)
            notes += gate.notes
        config = _follow_dataset_aliases(
            base_cfg, mf.merge(mf.merge(base_cfg, tuned), _nest(overrides)))
        result = MindFormersExport(config, Path(base), style,
                                   changes=_diff(base_cfg, config))
        checked = config
    problems = mf.problems(checked)
    if problems:
        source = "export.mindformers_overrides" if overrides else what if base else "export"
        raise ConfigError(f"{source}: MindFormers would reject the exported config: "
                          f"{problems[0]}")
    result.notes = [n for n in notes if n] + unfaithful(job, merged=base_cfg is not None)
    return result


#: (task section, dataset section): MindFormers' configs write the task's dataset as the
#: YAML alias of the dataset (``dataset_config: *train_dataset``).
DATASET_ALIASES = (("train_dataset_task", "train_dataset"), ("eval_dataset_task", "eval_dataset"))


def _follow_dataset_aliases(base: dict, config: dict) -> dict:
    """A task's ``dataset_config`` that the base wrote as the alias of its dataset follows
    the tuned dataset. Loaded, the alias is a copy, and the tuned values would sit beside the
    base's; MindFormers replaces the task's config with the dataset's before training
    (``trainer/base_trainer.py``), so both now say what trains."""
    for task, data in DATASET_ALIASES:
        section = base.get(task)
        if (isinstance(section, dict) and isinstance(base.get(data), dict)
                and isinstance(config.get(data), dict)
                and section.get("dataset_config") == base.get(data)):
            config = mf.merge(config, {task: {"dataset_config": config[data]}})
    return config


def _trial_hardware_note(job: TrialConfig, base_cfg: dict) -> str:
    device = (base_cfg.get("context") or {}).get("device_target") or mf.DEFAULT_DEVICE_TARGET
    if str(device).lower() == job.hardware.backend.value.lower():
        return ""
    return (f"context.device_target: {job.hardware.backend.value}, where the trials ran "
            f"(the workload's config says {device}); the hardware keys are the trials'.")


def _fit_to_base(tuned: dict, base: dict, *, checkpoint_every: int) -> dict:
    """Adjust the tuned keys to what the base already says: its lr schedule type stays
    (only the rate is tuned), its optimizer's betas and eps stay, a per-input
    ``dataset_strategy`` follows the new data-parallel size, and its CheckpointMonitor
    saves every ``checkpoint_every`` steps (the export's interval)."""
    tuned = mf.merge({}, tuned)
    callbacks = base.get("callbacks")
    if isinstance(callbacks, list) and any(isinstance(c, dict) and
                                           c.get("type") == "CheckpointMonitor"
                                           for c in callbacks):
        tuned["callbacks"] = [
            {**c, "save_checkpoint_steps": checkpoint_every}
            if isinstance(c, dict) and c.get("type") == "CheckpointMonitor" else c
            for c in callbacks]
    if isinstance(base.get("lr_schedule"), dict) and base["lr_schedule"].get("type"):
        tuned["lr_schedule"] = {"learning_rate": tuned["lr_schedule"]["learning_rate"]}
    if isinstance(base.get("optimizer"), dict) and base["optimizer"].get("type"):
        tuned["optimizer"] = {"weight_decay": tuned["optimizer"]["weight_decay"]}
    strategy = (base.get("parallel") or {}).get("dataset_strategy")
    if isinstance(strategy, list) and all(isinstance(s, list) and s for s in strategy):
        dp = tuned["parallel_config"]["data_parallel"]
        tuned["parallel"]["dataset_strategy"] = [[dp, *s[1:]] for s in strategy]
    if tuned["parallel"]["parallel_mode"] == mf.DATA_PARALLEL and \
            (base.get("parallel") or {}).get("parallel_mode") in (mf.SEMI_AUTO_PARALLEL,
                                                                  mf.AUTO_PARALLEL) \
            and tuned["use_parallel"]:
        # A semi-auto base runs plain data parallel as well; keep its mode and its sums.
        del tuned["parallel"]["parallel_mode"], tuned["parallel"]["gradients_mean"]
    return tuned


def _minimal_model() -> dict:
    """What a fragment is checked against: MindFormers' defaults, no model dimensions."""
    return {"model": {"model_config": {}}}


def _nest(dotted: dict) -> dict:
    out: dict = {}
    for key, value in dotted.items():
        node = out
        parts = str(key).split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"export.mindformers_overrides: {key} sets a key inside "
                                  f"{part}, which another override sets to a value")
        node[parts[-1]] = value
    return out


def _diff(before: dict, after: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    changes = []
    for key, new in after.items():
        name = f"{prefix}{key}"
        old = before.get(key) if isinstance(before, dict) else None
        if isinstance(new, dict) and isinstance(old, dict):
            changes += _diff(old, new, f"{name}.")
        elif new != old:
            changes.append((name, old, new))
    return changes


def changes_section(export: MindFormersExport) -> str:
    """CHANGES.md's part on ``mindformers.yaml``."""
    lines = ["", "## MindFormers config (`mindformers.yaml`)", ""]
    if export.base is None:
        lines.append(f"A fragment of the tuned keys ({export.style} model config); "
                     "`export.mindformers_base=YOUR.yaml` merges them into your config.")
    else:
        lines.append(f"`{export.base}` with the tuned values merged in "
                     f"({counted(len(export.changes), 'key')} changed):")
        lines += ["", "| key | your config | exported |", "|---|---|---|"]
        lines += [f"| `{key}` | {table_cell(old)} | {table_cell(new)} |"
                  for key, old, new in export.changes]
    if export.notes:
        lines += ["", "Not carried over as measured:", ""]
        lines += [f"- {note}" for note in export.notes]
    return "\n".join(lines) + "\n"


def table_cell(value: object) -> str:
    if value is None:
        return "(absent)"
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").replace("|", "\\|")
