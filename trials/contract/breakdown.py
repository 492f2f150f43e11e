"""Where a step's time goes, from profiler op events and the trial's own step clock.

Pure Python (no MindSpore), so that both the trial program, which parses the
profiler's output, and the tests can use it. A step is split into:

* ``forward``, ``backward``, ``optimizer``: compute ops, by their scope name.
  MindSpore puts a graph's gradient ops under ``Gradients/`` (and the ops its bprop
  expanders make under ``Expand/``), an optimizer's under its cell's scope
  (``Default/optimizer-AdamWeightDecay/...``) and the forward under the loss cell's
  (``Default/scaled-ScaledLoss/...``). Ops of the step cell itself
  (``Default/ReduceSum-op3``: no cell scope) are its update tail, unscale, global
  norm and clipping (trials/step.py), and count as optimizer;
* ``communication``: collectives (all-reduce and friends), split into *exposed*
  (nothing else ran meanwhile) and *overlapped* (hidden behind compute);
* ``data_wait``: the trial's own clock, from asking the dataset for the batch to
  getting it;
* ``idle``: the rest of the step, host-side work between ops (Python, launch,
  synchronisation) where no op ran.

The parts partition the measured step time, so the shares add up to 1.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: What a profiled step's time splits into: its operators' work, the input wait, the host
#: time between operators (idle), and the loop between one step's loss and the next
#: step's fetch (between_steps: the loss guard, the metrics line, threads holding the GIL),
#: so that the parts partition the loop's period, the step time every figure uses.
CATEGORIES = ("forward", "backward", "optimizer", "communication", "data_wait", "idle",
              "between_steps")
COMPUTE = ("forward", "backward", "optimizer")

#: Op types that are collectives (MindSpore names on CPU/mccl, GPU/NCCL and Ascend/HCCL).
COLLECTIVES = frozenset({"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "AllToAll",
                         "AlltoAll", "AlltoAllV", "Send", "Receive", "Recv", "Barrier",
                         "NeighborExchange", "CollectiveScatter", "CollectiveGather"})
#: ...and prefixes of backend-specific collective kernels (HcomAllReduce, NcclAllGather, hcom_*).
COLLECTIVE_PREFIXES = ("Hcom", "hcom_", "Nccl", "nccl", "Mccl")
#: Scope fragments of optimizer work: the optimizer cell, and our update tail's gradient
#: unscale/clip/norm and loss-scale adjustment (trials/step.py ``_Update``).
OPTIMIZER_SCOPES = ("/opt-", "/optimizer-", "optimizer", "Adam", "Lamb", "Momentum", "SGD",
                    "clip_by", "/scaler-", "LossScale")


@dataclass(frozen=True)
class OpEvent:
    """One op execution: full scope name, op type, start and duration in microseconds."""

    name: str
    type: str
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(frozen=True)
class StepWindow:
    """One profiled step on the trial's clock (microseconds since the epoch, as the
    profiler's timestamps), from its fetch to its loss; ``period_us``: the loop's period
    that ends with it, from the previous step's loss (0: the window alone)."""

    start_us: float
    end_us: float
    data_wait_us: float
    period_us: float = 0.0

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


def _known(cls, data: dict[str, Any] | None) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in (data or {}).items() if k in names}


@dataclass(frozen=True)
class OpRow:
    """One row of :func:`top_ops`: an op type in one part of the step."""

    type: str = ""
    category: str = ""  # one of CATEGORIES
    calls_per_step: float = 0.0
    ms_per_step: float = 0.0
    share: float = 0.0  # of the step
    example: str = ""  # the slowest call's scope name

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> OpRow:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class MemoryStats:
    """Peak, mean and minimum of a memory curve (MiB); None where it had no sample."""

    peak_mib: float | None = None
    mean_mib: float | None = None
    min_mib: float | None = None
    peak_over_mean: float | None = None
    samples: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MemoryStats:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class MemoryCurve(MemoryStats):
    """The profiled steps' memory curve (downsampled), its statistics and host RSS's."""

    source: str | None = None  # "MindSpore allocator" or "host RSS"; None: no curve
    t_s: list[float] = field(default_factory=list)  # seconds into the profiled steps
    mib: list[float] = field(default_factory=list)
    rss: MemoryStats = field(default_factory=MemoryStats)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MemoryCurve:
        known = _known(cls, data)
        rss = known.get("rss")
        known["rss"] = rss if isinstance(rss, MemoryStats) else MemoryStats.from_json(rss)
        return cls(**known)


def op_type_of(name: str) -> str:
    """``Default/opt-AdamWeightDecay/AdamWeightDecay-op3`` -> ``AdamWeightDecay``."""
    leaf = name.rsplit("/", 1)[-1]
    return leaf.split("-op", 1)[0] if "-op" in leaf else leaf


def category(op: OpEvent) -> str:
    if op.type in COLLECTIVES or op.type.startswith(COLLECTIVE_PREFIXES):
        return "communication"
    if op.name.startswith(("Gradients/", "Expand/")) or "/Gradients/" in op.name \
            or "Grad_" in op.name:
        return "backward"
    if any(scope in op.name for scope in OPTIMIZER_SCOPES):
        return "optimizer"
    if op.name.count("/") == 1 and op.name.startswith("Default/"):
        return "optimizer"  # the step cell's own ops: its update tail (see the docstring)
    return "forward"


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two unions of intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def in_window(op: OpEvent, w: StepWindow) -> bool:
    return w.start_us <= op.start_us < w.end_us


def split_steps(ops: list[OpEvent], windows: list[StepWindow]) -> dict:
    """The mean step split over ``windows``: seconds per step and shares of the step.

    Busy time per category is the union of its ops' intervals (ops on parallel streams
    are not counted twice); communication that ran while compute ran is *overlapped*
    and is not part of the step's critical path, so the split counts only its exposed
    part. When op times exceed the step's compute time (clock skew between the
    profiler and the trial), compute is scaled down so the parts still partition it.
    """
    if not windows:
        raise ValueError("no profiled step")
    totals = defaultdict(float)
    exposed_comm = overlapped_comm = comm_total = 0.0
    for w in windows:
        inside = [op for op in ops if in_window(op, w)]
        by_cat = {c: _union([(op.start_us, min(op.end_us, w.end_us)) for op in inside
                             if category(op) == c]) for c in ("communication", *COMPUTE)}
        compute_union = _union([iv for c in COMPUTE for iv in by_cat[c]])
        comm = by_cat["communication"]
        hidden = _overlap(comm, compute_union)
        comm_total += _length(comm)
        overlapped_comm += hidden
        exposed_comm += _length(comm) - hidden
        busy = {c: _length(by_cat[c]) for c in COMPUTE}
        busy["communication"] = _length(comm) - hidden
        room = max(0.0, w.dur_us - w.data_wait_us)
        used = sum(busy.values())
        scale = min(1.0, room / used) if used > 0 else 1.0
        for c, v in busy.items():
            totals[c] += v * scale
        totals["data_wait"] += min(w.data_wait_us, w.dur_us)
        totals["idle"] += max(0.0, room - used * scale)
        totals["between_steps"] += max(0.0, w.period_us - w.dur_us)
    n = len(windows)
    step_s = sum(step_us(w) for w in windows) / n / 1e6
    seconds = {c: totals[c] / n / 1e6 for c in CATEGORIES}
    whole = sum(seconds.values())
    shares = {c: (seconds[c] / whole if whole > 0 else 0.0) for c in CATEGORIES}
    return {"step_s": step_s, "seconds": seconds, "shares": shares,
            "communication": {"total_s": comm_total / n / 1e6,
                              "exposed_s": exposed_comm / n / 1e6,
                              "overlapped_s": overlapped_comm / n / 1e6}}


def step_us(w: StepWindow) -> float:
    """One step's length: the loop's period (fetch to the next fetch), or its window where
    no period was measured; what the split and the operators' shares are shares of."""
    return max(w.dur_us, w.period_us)


def top_ops(ops: list[OpEvent], windows: list[StepWindow], k: int = 10) -> list[OpRow]:
    """The ``k`` op types with the most time per step, each part of the step apart (a
    MatMul of the forward and one of the backward are two rows): calls, ms per step,
    share of the step (the loop's period, :func:`step_us`, as the split's: over the
    fetch-to-loss window alone a Cast read 20.4 % of a step whose table put it at 14.9 %)
    and the slowest call's scope name."""
    n = len(windows)
    mean_step_us = sum(step_us(w) for w in windows) / n if n else 0.0
    groups: dict[tuple[str, str], list[OpEvent]] = defaultdict(list)
    for op in ops:
        if any(in_window(op, w) for w in windows):
            groups[op.type, category(op)].append(op)
    rows = []
    for (op_type, part), events in groups.items():
        total = sum(e.dur_us for e in events)
        rows.append(OpRow(type=op_type, category=part,
                          calls_per_step=len(events) / n, ms_per_step=total / n / 1e3,
                          share=total / n / mean_step_us if mean_step_us else 0.0,
                          example=max(events, key=lambda e: e.dur_us).name))
    rows.sort(key=lambda r: r.ms_per_step, reverse=True)
    return rows[:k]


def memory_stats(mib: list[float], t: list[float] | None = None) -> MemoryStats:
    """Peak, mean and minimum of a memory curve (MiB), and peak over mean.

    With the sample times ``t``, the mean is over time (each value holds until the next
    sample): an allocator's record has bursts of events where it allocates and frees,
    and a mean over events would weigh those moments over the long flat stretches.
    """
    if not mib:
        return MemoryStats()
    peak = max(mib)
    mean = sum(mib) / len(mib)
    if t is not None and len(t) > 1 and t[-1] > t[0]:
        mean = sum(v * (t2 - t1) for v, t1, t2 in zip(mib, t, t[1:])) / (t[-1] - t[0])
    return MemoryStats(peak_mib=peak, mean_mib=mean, min_mib=min(mib),
                       peak_over_mean=peak / mean if mean > 0 else 0.0, samples=len(mib))


def downsample(t: list[float], v: list[float], n: int = 400) -> tuple[list[float], list[float]]:
    """At most ``n`` points of a curve, keeping each bucket's maximum (peaks survive)."""
    if len(t) <= n:
        return list(t), list(v)
    size = len(t) / n
    out_t, out_v = [], []
    for i in range(n):
        lo, hi = int(i * size), max(int((i + 1) * size), int(i * size) + 1)
        j = max(range(lo, min(hi, len(v))), key=v.__getitem__)
        out_t.append(t[j])
        out_v.append(v[j])
    return out_t, out_v
