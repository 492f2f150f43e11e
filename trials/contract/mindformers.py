"""MindFormers YAML configs, read without MindFormers: what both sides need to know.

The export (autotune side) merges tuned knobs into a user's MindFormers config and
checks the result; the MindFormers workload adapter (``trials/mindformers_workload.py``,
trial side) builds a model from one. Both read configs here, so a config the adapter
cannot build, or one MindFormers would reject, is refused before anything is written or
launched. The facts below are MindFormers 2.1.0's (``tools/register/template.py``,
``tools/register/config.py``, ``trainer/base_trainer.py``,
``modules/transformer/op_parallel_config.py``); ``tests/mindformers/`` checks them
against MindFormers itself.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from trials.contract.rules import ConfigError

#: The version whose schema this module follows (and the optional environment installs).
MINDFORMERS_VERSION = "2.1.0"

#: ``factory`` of the MindFormers workload adapter (``workload.entry``).
ADAPTER_ENTRY = "trials.mindformers_workload:workload"

#: Models the adapter builds and trains, with their config class: the legacy Llama is
#: what trains on the CPU (MindFormers' new "mcore" models need Ascend).
ADAPTER_MODELS = {"LlamaForCausalLM": "LlamaConfig"}

#: Sections whose unknown keys MindFormers refuses (``KeyError: The config '...' gets an
#: unexpected key``); the others (context, parallel, train_dataset, optimizer, ...) take
#: any key, so a misspelt one passes there silently.
STRICT_SECTIONS = {
    "parallel_config": (
        "data_parallel", "model_parallel", "context_parallel", "expert_parallel",
        "pipeline_stage", "micro_batch_num", "seq_split_num", "use_seq_parallel",
        "optimizer_shard", "gradient_aggregation_group", "vocab_emb_dp",
        "context_parallel_algo", "ulysses_degree_in_cp", "mem_coeff"),
    "recompute_config": (
        "recompute", "select_recompute", "parallel_optimizer_comm_recompute",
        "select_comm_recompute", "mp_comm_recompute", "recompute_slice_activation",
        "select_recompute_exclude", "select_comm_recompute_exclude"),
    "runner_config": (
        "batch_size", "epochs", "sink_mode", "sink_size", "gradient_accumulation_steps",
        "num_classes", "stop_step"),
    "swap_config": ("swap", "layer_swap", "op_swap", "default_prefetch"),
}

#: Top-level sections a MindFormers config is recognised by (besides ``model``).
_MINDFORMERS_SECTIONS = ("trainer", "runner_config", "runner_wrapper", "parallel_config",
                         "context", "train_dataset", "run_mode")

#: Per-model precision keys: legacy model configs and the new (mcore) ones name them
#: differently, and MindFormers passes an unknown one on unnoticed.
PRECISION_KEYS = {
    "legacy": {"params": "param_init_type", "compute": "compute_dtype",
               "layernorm": "layernorm_compute_type", "softmax": "softmax_compute_type",
               "rotary": "rotary_dtype"},
    "mcore": {"params": "params_dtype", "compute": "compute_dtype",
              "layernorm": "layernorm_compute_dtype", "softmax": "softmax_compute_dtype",
              "rotary": "rotary_dtype"},
}

#: Legacy model_config keys a CPU run needs: the same math through the kernels the CPU
#: has (MindFormers' fused RmsNorm and flash attention are Ascend-only, and its legacy
#: RoPE fails on the CPU without the slice variant).
CPU_MODEL_KEYS = {"use_rope_slice": True, "fused_rms_norm": False, "use_flash_attention": False}

#: ``parallel.parallel_mode`` values.
DATA_PARALLEL, SEMI_AUTO_PARALLEL, AUTO_PARALLEL = 0, 1, 2


#: The MindFormers device when a config names none: MindFormers' context falls back to
#: it (``core/context/build_context.py``), and so does the PyNative ``ContextConfig``.
DEFAULT_DEVICE_TARGET = "Ascend"

#: Model dimensions under the names legacy model configs and new (mcore, PyNative) ones use.
MODEL_DIM_KEYS = {"layers": ("num_layers", "num_hidden_layers"), "hidden": ("hidden_size",),
                  "heads": ("num_heads", "num_attention_heads"), "sequence": ("seq_length",)}

#: The two kinds of MindFormers config: the static-graph YAML (``run_mindformer.py
#: --config``, read by ``MindFormerConfig``) and the PyNative trainer's ``TrainConfig``
#: (``mindformers/pynative/config/config.py``: dataclasses, model keys directly under model).
STATIC, PYNATIVE = "static", "pynative"
#: Top-level sections a PyNative TrainConfig is recognised by (besides ``model``).
_TRAIN_CONFIG_SECTIONS = ("training", "parallelism", "lr_scheduler", "recompute", "checkpoint")


def model_dims(model_config: dict) -> dict[str, int]:
    """The layers, hidden size, heads and sequence length a model config states."""
    dims = {}
    for dim, names in MODEL_DIM_KEYS.items():
        value = next((model_config[n] for n in names if isinstance(model_config.get(n), int)
                      and not isinstance(model_config.get(n), bool)), None)
        if value is not None:
            dims[dim] = value
    return dims


def is_train_config(cfg: object) -> bool:
    """A PyNative TrainConfig YAML: model keys directly under ``model``."""
    return (isinstance(cfg, dict) and isinstance(cfg.get("model"), dict)
            and "model_config" not in cfg["model"]
            and any(key in cfg for key in _TRAIN_CONFIG_SECTIONS))


def load_any(path: str | Path, *, what: str) -> tuple[str, dict]:
    """(STATIC or PYNATIVE, the config) of a MindFormers YAML of either kind."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what}={path}: no such file; give the path of a MindFormers YAML")
    cfg = _read(path, what)
    if is_mindformers_config(cfg):
        return STATIC, cfg
    if is_train_config(cfg):
        return PYNATIVE, cfg
    raise ConfigError(
        f"{what}={path} is not a MindFormers config: a static-graph one needs a "
        f"model.model_config section and one of {', '.join(_MINDFORMERS_SECTIONS)}; a "
        f"PyNative TrainConfig one a model section and one of "
        f"{', '.join(_TRAIN_CONFIG_SECTIONS)}")


def load_config(path: str | Path, *, what: str) -> dict:
    """A MindFormers YAML with its ``base_config`` files merged in as MindFormers does.

    ``what`` names the setting the path came from, for the error line."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what}={path}: no such file; give the path of a MindFormers YAML")
    cfg = _read(path, what)
    if not is_mindformers_config(cfg):
        raise ConfigError(
            f"{what}={path} is not a MindFormers config: it needs a model.model_config "
            f"section and one of {', '.join(_MINDFORMERS_SECTIONS)} (e.g. the YAML you pass "
            "to run_mindformer.py --config)")
    return cfg


def _read(path: Path, what: str, depth: int = 0) -> dict:
    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{what}={path} cannot be read as YAML "
                          f"({str(exc).splitlines()[0]})") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{what}={path} is not a MindFormers config: its top level is "
                          f"{type(cfg).__name__}, not a mapping of sections")
    bases = cfg.pop("base_config", None)
    if bases is None:
        return cfg
    if depth > 8:
        raise ConfigError(f"{what}={path}: base_config nests deeper than 8 files (a cycle?)")
    merged: dict = {}
    for base in bases if isinstance(bases, list) else [bases]:
        merged.update(_read(path.parent / str(base), what, depth + 1))
    return merge(merged, cfg)


def is_mindformers_config(cfg: object) -> bool:
    if not isinstance(cfg, dict):
        return False
    model = cfg.get("model")
    has_model = isinstance(model, dict) and isinstance(model.get("model_config"), dict)
    return has_model and any(key in cfg for key in _MINDFORMERS_SECTIONS)


def merge(base: dict, update: dict) -> dict:
    """``update`` over ``base``, recursively; a mapping replaces a scalar and vice versa.

    MindFormers' own merge (``_merge_a_into_b``) recurses into a key whenever the new value
    is a mapping, so a mapping over a number crashes it (``'float' object has no attribute
    'copy'``): that is why ``scale_sense: {type: DynamicLossScaleUpdateCell}`` cannot be
    merged over the ``scale_sense: 1.0`` of MindFormers' shipped configs by MindFormers.
    """
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def model_style(cfg: dict) -> str:
    """``legacy`` or ``mcore``: MindFormers' ``use_legacy`` (default True in 2.1.0)."""
    return "legacy" if cfg.get("use_legacy", True) else "mcore"


def adapter_problem(cfg: dict) -> str | None:
    """Why the workload adapter cannot build this config's model, or None."""
    model = cfg["model"]
    arch = model.get("arch")
    arch_type = arch.get("type") if isinstance(arch, dict) else None
    config_type = model["model_config"].get("type")
    supported = ", ".join(f"{a} ({c})" for a, c in ADAPTER_MODELS.items())
    if model_style(cfg) != "legacy":
        return ("its model is a new (mcore, use_legacy: False) MindFormers model, which "
                f"trains on Ascend only; the adapter builds {supported} with use_legacy: True")
    if arch_type not in ADAPTER_MODELS:
        return (f"its model.arch.type is {arch_type!r}; the adapter builds {supported}")
    if config_type != ADAPTER_MODELS[arch_type]:
        return (f"its model.model_config.type is {config_type!r}; {arch_type} needs "
                f"{ADAPTER_MODELS[arch_type]}")
    return None


def problems(cfg: dict) -> list[str]:
    """What MindFormers would refuse in this config, or silently change: each a line
    naming the key and the fix."""
    found = []
    for section, known in STRICT_SECTIONS.items():
        value = cfg.get(section)
        if value is None:
            continue
        if not isinstance(value, dict):
            found.append(f"{section} must be a mapping, not {type(value).__name__}")
            continue
        for key in value:
            if key not in known:
                found.append(f"{section}.{key} is not a MindFormers {MINDFORMERS_VERSION} key "
                             f"(MindFormers raises on it); known: {', '.join(known)}")
    pc, rc = cfg.get("parallel_config") or {}, cfg.get("runner_config") or {}
    ints = {f"parallel_config.{k}": pc.get(k, 1) for k in
            ("data_parallel", "model_parallel", "pipeline_stage", "micro_batch_num")}
    ints.update({f"runner_config.{k}": rc.get(k, 1)
                 for k in ("batch_size", "gradient_accumulation_steps")})
    bad = [k for k, v in ints.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1]
    found += [f"{k}={ints[k]!r} must be a positive integer" for k in bad]
    if bad:
        return found
    dp, mp = ints["parallel_config.data_parallel"], ints["parallel_config.model_parallel"]
    pp, mbn = ints["parallel_config.pipeline_stage"], ints["parallel_config.micro_batch_num"]
    accumulation = ints["runner_config.gradient_accumulation_steps"]
    mode = (cfg.get("parallel") or {}).get("parallel_mode", SEMI_AUTO_PARALLEL)
    if pp > 1 and mbn < pp:
        found.append(f"parallel_config.micro_batch_num={mbn} is below pipeline_stage={pp}: "
                     "MindFormers requires micro_batch_num >= pipeline_stage")
    if not cfg.get("use_parallel", False) and dp * mp * pp > 1:
        found.append(f"use_parallel is False, so MindFormers resets data_parallel={dp}, "
                     f"model_parallel={mp}, pipeline_stage={pp} to 1: set use_parallel: True")
    if cfg.get("use_parallel", False) and mode == DATA_PARALLEL and (mp > 1 or pp > 1):
        found.append(f"parallel.parallel_mode=0 (data parallel) cannot split the model "
                     f"(model_parallel={mp}, pipeline_stage={pp}): use parallel_mode 1")
    if accumulation > 1 and (mode not in (SEMI_AUTO_PARALLEL, AUTO_PARALLEL)
                             or not cfg.get("use_parallel", False)):
        found.append(f"runner_config.gradient_accumulation_steps={accumulation} needs "
                     "use_parallel: True and parallel.parallel_mode 1 or 2; MindFormers "
                     "resets it to 1 otherwise")
    model_config = cfg["model"]["model_config"]
    layers = model_config.get("num_layers", model_config.get("num_hidden_layers"))
    if isinstance(layers, int) and pp > 1 and layers < pp:
        found.append(f"model.model_config num_layers={layers} is below pipeline_stage={pp}")
    heads = model_config.get("num_heads", model_config.get("num_attention_heads"))
    if isinstance(heads, int) and heads % mp:
        found.append(f"model.model_config num_heads={heads} is not divisible by "
                     f"model_parallel={mp}")
    return found


def check(cfg: dict, *, what: str) -> None:
    """ConfigError with the first problem MindFormers would have with ``cfg``."""
    found = problems(cfg)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ConfigError(f"{what}: {found[0]}{more}")


# -- the MindFormers workload ---------------------------------------------------------------
#: The options of ``workload.entry=trials.mindformers_workload:workload``.
OPTION_CONFIG = "config"  # the MindFormers YAML whose model section is built
OPTION_MODEL_CONFIG = "model_config"  # keys set over its model.model_config (to shrink it)
#: true: the workload's n_layers, d_model, n_heads, kv_heads, ffn_dim, seq_len, vocab_size
#: replace the config's dimensions (one source for a shrunk model).
OPTION_DIMS = "dims_from_workload"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def pin_workload_config(workload) -> None:
    """Make a MindFormers workload's relative ``options.config`` absolute (trials run in
    their own directories): relative to the working directory where it exists there,
    else to the project (the shipped examples)."""
    if workload.entry != ADAPTER_ENTRY:
        return
    path = workload.options.get(OPTION_CONFIG)
    if not isinstance(path, str) or not path or Path(path).expanduser().is_absolute():
        return
    here = Path.cwd() / path
    workload.options[OPTION_CONFIG] = str(here if here.exists() else _PROJECT_ROOT / path)


def workload_model_config(workload) -> tuple[dict, dict]:
    """(the whole MindFormers config, its model_config with the workload's keys over it);
    ConfigError when the adapter cannot build it."""
    what = f"workload.options.{OPTION_CONFIG}"
    path = workload.options.get(OPTION_CONFIG)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{what} must name a MindFormers YAML (workload={workload.name} uses "
                          f"{ADAPTER_ENTRY}), e.g. {what}=examples/mindformers/llama2_7b.yaml")
    cfg = load_config(path, what=what)
    problem = adapter_problem(cfg)
    if problem:
        raise ConfigError(f"{what}={path}: the MindFormers workload cannot build it: {problem}")
    shrink = workload.options.get(OPTION_MODEL_CONFIG) or {}
    if not isinstance(shrink, dict):
        raise ConfigError(f"workload.options.{OPTION_MODEL_CONFIG} must be a mapping of "
                          "model_config keys, e.g. {num_layers: 2, hidden_size: 64}")
    model_config = merge(cfg["model"]["model_config"], shrink)
    if workload.options.get(OPTION_DIMS):
        w = workload
        model_config.update(num_layers=w.n_layers, hidden_size=w.d_model, num_heads=w.n_heads,
                            seq_length=w.seq_len, vocab_size=w.vocab_size)
        if w.kv_heads:
            model_config["n_kv_heads"] = w.kv_heads
        if w.ffn_dim:
            model_config["intermediate_size"] = w.ffn_dim
    for key in ("seq_length", "hidden_size", "num_layers", "num_heads", "vocab_size"):
        value = model_config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{what}={path}: model.model_config.{key}={value!r} must be a "
                              f"positive integer (set it there or in workload.options."
                              f"{OPTION_MODEL_CONFIG}.{key})")
    return cfg, model_config


def workload_problem(trial) -> str | None:
    """Why this trial's MindFormers workload cannot run as configured, or None."""
    if trial.workload.entry != ADAPTER_ENTRY:
        return None
    try:
        _, model_config = workload_model_config(trial.workload)
    except ConfigError as exc:
        return str(exc)
    heads, layers = model_config["num_heads"], model_config["num_layers"]
    kv_heads = model_config.get("n_kv_heads") or heads
    if model_config["hidden_size"] % heads:
        return (f"model_config hidden_size={model_config['hidden_size']} is not divisible by "
                f"num_heads={heads} (workload.options.{OPTION_MODEL_CONFIG})")
    for name, count in (("num_heads", heads), ("n_kv_heads", kv_heads)):
        if count % trial.parallel.mp:
            return (f"model_config {name}={count} is not divisible by "
                    f"parallel.mp={trial.parallel.mp}: MindFormers splits heads over model "
                    "parallel")
    if trial.parallel.pp > layers:
        return (f"model_config num_layers={layers} is below parallel.pp={trial.parallel.pp}: "
                "MindFormers needs num_layers >= pipeline_stage")
    if trial.data.source.value != "synthetic" and model_config["vocab_size"] < 256:
        return (f"model_config vocab_size={model_config['vocab_size']}: the "
                f"{trial.data.source.value} source yields byte tokens 0..255; use >= 256 or "
                "data=synthetic")
    return None
