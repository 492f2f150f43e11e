"""Rules that reject a proposal before it costs a launch.

Structural rules come from the config and the hardware profile (its
``supports`` table, through the same capability rule the trial program applies);
the OOM rule learns from the study: an OOM at micro-batch size k rules out
larger sizes with every other knob equal, the split too: a rank's memory is not its
micro-batch alone (data parallel adds its gradient reduction's buffers, and shards
states where the optimizer is sharded), so an OOM at one split says nothing of another.
"""

from __future__ import annotations

from typing import Any

from autotune.search.space import SearchSpace
from autotune.study.records import TrialRecord
from trials.contract.capabilities import unsupported_reason
from trials.contract.outcomes import Outcome
from trials.contract.schema import ConfigError, TrialConfig, micro_batch_size

#: The knobs that set the micro-batch size with the rest of the job unchanged.
MICRO_BATCH_KNOBS = ("train.micro_batches",)


def structural_problem(space: SearchSpace,
                       params: dict[str, Any]) -> tuple[TrialConfig | None, str | None]:
    """(config, None) when the point can run, else (config or None, reason)."""
    try:
        cfg = space.trial_config(params)
    except ConfigError as exc:
        return None, str(exc)
    hw, p = cfg.hardware, cfg.parallel
    if space.devices is not None and p.devices != space.devices:
        return cfg, f"split {p.split} uses {p.devices} devices; the job has {space.devices}"
    nodes = space.nodes
    if p.devices > hw.devices * nodes:
        where = f"{nodes} nodes of {hw.devices}" if nodes > 1 else \
            f"hardware profile {hw.name} has {hw.devices}"
        return cfg, f"split {p.split} needs {p.devices} devices; {where}"
    return cfg, unsupported_reason(cfg)


def oom_dominating(params: dict[str, Any], cfg: TrialConfig,
                   history: list[TrialRecord]) -> TrialRecord | None:
    """A finished OOM trial with every other knob equal (the split too: a dp=2 run at
    micro-batch size 2 ran out of memory where dp=1 at size 4 fit, on the recorded CPU
    landscape), the same step structure, and a micro-batch size <= ours.

    The same step structure: accumulating over micro-batches keeps a gradient buffer that
    one step over the whole batch does not, so peak memory is monotone in the micro-batch
    size only between two accumulating runs or two that do not. On the recorded image_cnn
    landscape, whose activations are small, 2 micro-batches peaked above 1 (0.52 against
    0.49 GiB), and an OOM at 2 ruled out the optimum at 1."""
    size = micro_batch_size(cfg)
    accumulates = cfg.train.micro_batches > 1
    for record in history:
        if record.reason is not Outcome.OOM or record.micro_batch_size is None:
            continue
        same_rest = all(record.params.get(k) == v for k, v in params.items()
                        if k not in MICRO_BATCH_KNOBS)
        same_step = (record.params.get("train.micro_batches", cfg.train.micro_batches) > 1) \
            == accumulates
        if same_rest and same_step and size >= record.micro_batch_size:
            return record
    return None


def only_the_baseline(space: SearchSpace) -> str | None:
    """Why the space holds nothing to search besides its baseline (every other point breaks
    a structural rule, or there is none), or None when another point can run. One-knob
    changes of the baseline are tried first: one of them nearly always runs."""
    neighbours = space.neighbours()
    rest = [p for p in space.points() if p != space.baseline and p not in neighbours]
    example = None
    for params in neighbours + rest:
        _, problem = structural_problem(space, params)
        if problem is None:
            return None
        if example is None:
            changed = ", ".join(f"{k}={v}" for k, v in params.items() if v != space.baseline[k])
            example = f"{changed}: {problem}"
    if example is None:
        return "its only point is the baseline"
    return f"every other point breaks a structural rule (e.g. {example})"
