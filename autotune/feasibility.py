"""Rules that reject a proposal before it costs a launch.

Structural rules come from the config and the hardware profile; the OOM rule
learns from the study: an OOM at micro-batch size k rules out larger sizes with
every other knob equal.
"""

from __future__ import annotations

from typing import Any

from autotune.records import TrialRecord
from autotune.space import SearchSpace
from trials.config import ConfigError, DType, TrialConfig, micro_batch_size

MICRO_BATCH_KNOBS = ("train.micro_batches", "parallel.split")


def structural_problem(space: SearchSpace,
                       params: dict[str, Any]) -> tuple[TrialConfig | None, str | None]:
    """(config, None) when the point can run, else (config or None, reason)."""
    try:
        cfg = space.trial_config(params)
    except ConfigError as exc:
        return None, str(exc)
    hw, p = cfg.hardware, cfg.parallel
    split = f"{p.dp}x{p.mp}x{p.pp}"
    if space.devices is not None and p.devices != space.devices:
        return cfg, f"split {split} uses {p.devices} devices; the job has {space.devices}"
    if p.devices > hw.devices:
        return cfg, (f"split {split} needs {p.devices} devices; hardware profile {hw.name} "
                     f"has {hw.devices}")
    if p.mp > 1 and not hw.supports.get("model_parallel", False):
        return cfg, (f"model parallel (mp={p.mp}) is not available on the "
                     f"{hw.backend.value} backend")
    if p.pp > 1 and not hw.supports.get("pipeline_parallel", False):
        return cfg, (f"pipeline parallel (pp={p.pp}) is not available on the "
                     f"{hw.backend.value} backend")
    if cfg.precision.dtype is DType.bfloat16 and not hw.supports.get("bf16", False):
        return cfg, f"bf16 is not available on the {hw.backend.value} backend"
    return cfg, None


def oom_dominating(params: dict[str, Any], cfg: TrialConfig,
                   history: list[TrialRecord]) -> TrialRecord | None:
    """A finished OOM trial with every other knob equal and a micro-batch size <= ours."""
    size = micro_batch_size(cfg)
    for record in history:
        if record.reason != "oom" or record.micro_batch_size is None:
            continue
        same_rest = all(record.params.get(k) == v for k, v in params.items()
                        if k not in MICRO_BATCH_KNOBS)
        same_split_shape = _split_without_dp(record.params) == _split_without_dp(params)
        if same_rest and same_split_shape and size >= record.micro_batch_size:
            return record
    return None


def _split_without_dp(params: dict[str, Any]) -> str:
    split = str(params.get("parallel.split", "1x1x1"))
    return split.split("x", 1)[1] if "x" in split else split
