"""Rules that reject a proposal before it costs a launch.

Structural rules come from the config and the hardware profile (its
``supports`` table, through the same capability rule the trial program applies);
the OOM rule learns from the study: a point that needs at least as much memory as one
that ran out of memory is ruled out. "At least as much" is known two ways only: a larger
micro-batch size of the same job, and a knob value the study's own measurements put at
or above another (:func:`memory_order`: every pair of trials that differ in that knob
alone measured the same or more peak memory with it, an OOM counting as more than any
peak that fit). A knob no such pair compared says nothing: an OOM at one split says
nothing of another until a pair has measured the two (a rank's memory is not its
micro-batch alone: data parallel adds its gradient reduction's buffers, and shards
states where the optimizer is sharded).
"""

from __future__ import annotations

import math
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
    """A launched trial that ran out of memory and that this point needs at least as much
    memory as: a micro-batch size at least its own, and every other knob where the two
    differ set to a value :func:`memory_order` puts at or above the OOM trial's."""
    size = micro_batch_size(cfg)
    order = None
    for record in history:
        if record.reason is not Outcome.OOM or not record.launched or \
                record.micro_batch_size is None or size < record.micro_batch_size:
            continue
        changed = changed_knobs(params, record.params)
        if changed and order is None:
            order = memory_order(history)
        if all((k, _key(record.params.get(k)), _key(params[k])) in order for k in changed):
            return record
    return None


def changed_knobs(params: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The knobs besides the micro-batch knobs where ``params`` differs from ``other``."""
    return [k for k, v in params.items()
            if k not in MICRO_BATCH_KNOBS and _key(other.get(k)) != _key(v)]


def memory_order(history: list[TrialRecord]) -> set[tuple[str, str, str]]:
    """(knob, lighter, heavier): ``heavier`` needed at least the memory ``lighter`` did in
    every pair of launched trials that differ in that knob alone, and at least one such
    pair exists. A trial that ran out of memory counts as more than any that fit; two that
    both ran out say nothing. Values are compared as strings (a knob's values from
    Optuna and from a queued point may differ in type)."""
    peaks = []
    for r in history:
        if not r.launched or r.reused_from is not None:
            continue
        if r.reason is Outcome.OOM:
            peaks.append((r.params, math.inf))
        elif r.peak_memory_gib is not None:
            peaks.append((r.params, r.peak_memory_gib))
    seen: dict[tuple[str, str, str], bool] = {}
    for i, (a, peak_a) in enumerate(peaks):
        for b, peak_b in peaks[i + 1:]:
            differ = [k for k in a.keys() | b.keys() if _key(a.get(k)) != _key(b.get(k))]
            if len(differ) != 1 or peak_a == peak_b == math.inf:
                continue
            k = differ[0]
            for (lo, p_lo), (hi, p_hi) in (((a, peak_a), (b, peak_b)),
                                            ((b, peak_b), (a, peak_a))):
                pair = (k, _key(lo.get(k)), _key(hi.get(k)))
                seen[pair] = seen.get(pair, True) and p_hi >= p_lo
    return {pair for pair, holds in seen.items() if holds}


def _key(value: Any) -> str:
    return str(value)


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
