"""Diagnosis rules over where a step's time goes, each quoting its numbers.

The evidence comes from a profile (trials/profiling.py) and, for the rules that do
not need one, from any trial's scorecard: every dp > 1 trial reports its gradient
all-reduce's share of the step and each rank's step time.

| rule | fires when | advice |
|---|---|---|
| communication | communication > 20 % of the step | accumulation, overlap, micro-batch, dp |
| data_wait | input-bound: data wait > 10 % of the step, or the probe | workers, less Python |
| dominant_op | one op type > 40 % of the step | named |
| memory_peaks | memory-curve peak > 3 x its mean | memory level, recompute |
| slow_rank | (max - min) / mean of per-rank step time > 5 %, dp > 1 | a slow rank |
| host_bound | host time (idle between ops, loop between steps) > 20 % | graph mode, bigger ops |
| cast_overhead | Cast operators > 10 % of the step | fp32, or fewer casts |

Advice is a list of moves (:class:`Move`); one that is a setting the run already has
(graph mode told to a graph-mode run) is left out wherever the run's settings are known.

Thresholds: communication from the method's four-layer evaluation ("over 20-30 % of
step time means the parallel strategy is wrong"); slow rank ((max-min)/mean > 5 %) from
msprof-analyze's advisor on Ascend
(https://gitee.com/ascend/mstt/tree/master/profiler/msprof_analyze/advisor);
one op over 40 % from this project's issue 10. The memory factor is ours: a step's
allocator curve rises through the forward and falls through the backward, so peaks
well above the time-weighted mean are the normal sawtooth (measured on the CPU: 2.5x
for gpt_tiny, whose weights are small, 1.14x for gpt_small); 3x and more says transient
buffers, not the resident state, set the peak.

The host-bound and cast thresholds are ours, set between what this CPU measured healthy
and what a new user's run showed: the default sweep's profiled winner (graph mode, fp32)
idled 5 % of its step with no Cast among its top operators (BENCHMARKS.md, "The share of
a sweep spent profiling its winner"), while ``profile workload=gpt_tiny precision=fp16``
idled 38.7 % with Cast at 19 % of the step (issue 24). 20 % idle is 4x the healthy figure:
the host, launching ops one at a time, is slower than the ops it launches. 10 % in Cast:
fp16 on this CPU is 1.5-1.75x slower than fp32 (docs/mindspore-cpu.md), so casts that cost
a tenth of the step are a precision that does not pay here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from autotune.presentation.findings import Finding
from autotune.presentation.labels import mib_text
from autotune.presentation.labels import share_text as _pct
from autotune.study.data_bound import CHEAPER_PREPROCESSING, input_bound
from trials.contract.breakdown import MemoryCurve, OpRow
from trials.contract.events import ProfileRecord
from trials.contract.knob_reach import Reach, knob_problem
from trials.contract.performance import Performance

COMM_SHARE_HIGH = 0.20
DOMINANT_OP_SHARE = 0.40
MEMORY_PEAK_FACTOR = 3.0
#: ...and only where what the peak adds to the curve's mean is this share of the process's
#: own peak (host RSS over the same steps): a ratio of two near-empty curves (a model of a
#: few KiB: 0.0 MiB peaks at 3.3x a mean of 0.0) says nothing of the run's memory.
MEMORY_PEAK_SHARE = 0.05
RANK_SPREAD_HIGH = 0.05
IDLE_SHARE_HIGH = 0.20
CAST_SHARE_HIGH = 0.10
#: The operator type a precision change inserts (MindSpore's ``Cast``).
CAST_OP = "Cast"


@dataclass(frozen=True)
class Move:
    """One change a finding advises, in words, and where it is one setting, that setting
    (``knob`` = ``value``, as the overrides write it): advice leaves out a move the run
    already made."""

    words: str
    knob: str | None = None
    value: object = None


def advise(e: Evidence, *moves: Move) -> str:
    """The moves the run has not made yet (:attr:`Evidence.settings`) and its workload can
    make (:attr:`Evidence.reach`: a knob it refuses is no advice), as one phrase: "a, b or
    c"; a move that is not one setting always stays."""
    cores = os.cpu_count() or 1

    def open_to(m: Move) -> bool:
        if m.knob is None:
            return True
        if e.settings.get(m.knob) == m.value:
            return False
        return e.reach is None or knob_problem(m.knob, m.value, e.reach, cores=cores) is None

    left = [m.words for m in moves if open_to(m)]
    return ", ".join(left[:-1]) + (" or " if len(left) > 1 else "") + (left[-1] if left else "")


@dataclass
class Evidence:
    """What the rules look at; None where it was not measured."""

    trial: int | None = None
    step_s: float | None = None
    shares: dict = field(default_factory=dict)  # category -> share of the step
    seconds: dict = field(default_factory=dict)  # category -> seconds per step
    comm_share: float | None = None
    comm_source: str = ""
    top_ops: list[OpRow] = field(default_factory=list)
    memory: MemoryCurve = field(default_factory=MemoryCurve)
    rank_step_s: list = field(default_factory=list)
    dp: int = 1
    #: The run's scorecard performance (its data wait and pipeline probe), where known.
    performance: Performance | None = None
    #: The run's settings (trials.contract.schema.knob_values), where known.
    settings: dict = field(default_factory=dict)
    #: What its workload applies (trials/contract/knob_reach.py), where known.
    reach: Reach | None = None

    @property
    def who(self) -> tuple[int, ...]:
        return () if self.trial is None else (self.trial,)

    @property
    def subject(self) -> str:
        return "This configuration" if self.trial is None else f"Trial #{self.trial}"


def from_profile(profile: ProfileRecord, performance: Performance | None = None, *,
                 trial: int | None = None, dp: int = 1, settings: dict | None = None,
                 reach: Reach | None = None) -> Evidence:
    """Evidence from a profile event and, optionally, the run's performance, its settings
    and what its workload applies."""
    perf = performance or Performance()
    shares = dict(profile.shares)
    comm = shares.get("communication")
    source = "profiled (exposed)"
    if perf.comm_share is not None and (comm is None or comm == 0):
        comm, source = perf.comm_share, "all-reduce timed alone"
    return Evidence(trial=trial, step_s=profile.step_s, shares=shares,
                    seconds=dict(profile.seconds), comm_share=comm, comm_source=source,
                    top_ops=list(profile.top_ops), memory=profile.memory,
                    rank_step_s=list(perf.rank_step_s), dp=dp, performance=perf,
                    settings=dict(settings or {}), reach=reach)


def from_performance(performance: Performance, *, trial: int | None = None,
                     dp: int = 1) -> Evidence:
    """Evidence from a trial's scorecard alone (no profile): data wait, communication and
    rank spread."""
    step_s = performance.step_time_s
    wait = performance.data_wait_share
    return Evidence(trial=trial, step_s=step_s,
                    shares={} if wait is None else {"data_wait": wait},
                    seconds={} if wait is None or step_s is None else {"data_wait": wait * step_s},
                    comm_share=performance.comm_share,
                    comm_source="all-reduce timed alone",
                    rank_step_s=list(performance.rank_step_s), dp=dp,
                    performance=performance)


def communication(e: Evidence) -> Finding | None:
    if e.comm_share is None or e.comm_share <= COMM_SHARE_HIGH:
        return None
    return Finding("communication", e.who, (
        f"{e.subject} spends {_pct(e.comm_share)} of its step in gradient communication "
        f"({e.comm_source}; above {_pct(COMM_SHARE_HIGH)}): the parallel strategy costs more "
        "than it buys. Accumulate gradients over more micro-batches, overlap communication "
        "with the backward pass, use a larger micro-batch, or fewer data-parallel ranks."),
        {"comm_share": e.comm_share})


def data_wait(e: Evidence) -> Finding | None:
    """Input-bound by the study's one rule (autotune/study/data_bound.py): the profile's own
    data-wait share where it measured one, else the run's, and the run's pipeline probe."""
    perf = e.performance or Performance()
    share = e.shares.get("data_wait", perf.data_wait_share)
    # The milliseconds go with the wait's share, not after the probe's cost share ("costs
    # 39.8 % of the step (0.4 ms of input wait a step)" read as one number).
    wait_s = e.seconds.get("data_wait")
    found = input_bound(perf, share, wait_s=wait_s)
    if found is None:
        return None
    why, nums = found
    return Finding("data_wait", e.who, (
        f"{e.subject} is input-bound: it {why}: "
        + advise(e, Move("add dataset workers (data.num_workers)", "data.num_workers",
                         int(e.settings.get("data.num_workers") or 1) + 1),
                 Move("turn on data.multiprocessing", "data.multiprocessing", True),
                 Move("convert the data to MindRecord (data=mindrecord)", "data.source",
                      "mindrecord"),
                 Move(CHEAPER_PREPROCESSING)) + "."), nums | {"data_wait_s": wait_s or 0.0})


def dominant_op(e: Evidence) -> Finding | None:
    if not e.top_ops or e.top_ops[0].share <= DOMINANT_OP_SHARE:
        return None
    top = e.top_ops[0]
    return Finding("dominant_op", e.who, (
        f"{e.subject}: one operator type, {top.type} ({top.category}), takes "
        f"{_pct(top.share)} of the step ({top.ms_per_step:.2f} ms in "
        f"{top.calls_per_step:.0f} calls; above {_pct(DOMINANT_OP_SHARE)}); its slowest "
        f"call is {top.example}. Speed that operator up (shape, dtype, fusion) before "
        "tuning anything else."), {"op_share": top.share})


def memory_peaks(e: Evidence) -> Finding | None:
    factor = e.memory.peak_over_mean
    if not factor or factor <= MEMORY_PEAK_FACTOR:
        return None
    process = e.memory.rss.peak_mib
    if process and e.memory.peak_mib - e.memory.mean_mib < MEMORY_PEAK_SHARE * process:
        return None
    return Finding("memory_peaks", e.who, (
        f"{e.subject}: the memory curve ({e.memory.source or 'memory'}) peaks at "
        f"{mib_text(e.memory.peak_mib)}, {factor:.1f}x its mean of "
        f"{mib_text(e.memory.mean_mib)} (above {MEMORY_PEAK_FACTOR:g}x): transient buffers, "
        "not the model, set the peak. Try "
        + advise(e, Move("a higher runtime.memory_optimize_level (O1)",
                         "runtime.memory_optimize_level", "O1"),
                 Move("train.recompute=full", "train.recompute", "full"),
                 Move("a smaller micro-batch (more train.micro_batches)")) + "."),
        {"peak_over_mean": factor})


def slow_rank(e: Evidence) -> Finding | None:
    ranks = e.rank_step_s
    if e.dp <= 1 or len(ranks) < 2:
        return None
    mean = sum(ranks) / len(ranks)
    spread = (max(ranks) - min(ranks)) / mean if mean > 0 else 0.0
    if spread <= RANK_SPREAD_HIGH:
        return None
    slowest = max(range(len(ranks)), key=ranks.__getitem__)
    return Finding("slow_rank", e.who, (
        f"{e.subject}: per-rank step times differ by {_pct(spread)} ((max - min) / mean, "
        f"above {_pct(RANK_SPREAD_HIGH)}); rank {slowest} is slowest at "
        f"{1e3 * ranks[slowest]:.1f} ms against a mean of {1e3 * mean:.1f} ms. Look for a slow "
        "rank: a busy device or core, a slower link, or uneven data shards."),
        {"rank_spread": spread})


def host_bound(e: Evidence) -> Finding | None:
    """Host time: idle between operators (launching them), and the training loop's own
    work between one step's loss and the next fetch; both shrink with fewer, larger ops
    and more work a step."""
    idle, loop = e.shares.get("idle"), e.shares.get("between_steps") or 0.0
    if idle is None or idle + loop <= IDLE_SHARE_HIGH:
        return None
    ms = "" if e.step_s is None else f", {1e3 * (idle + loop) * e.step_s:.1f} ms a step"
    parts = (f"{_pct(idle)} idle between operators and {_pct(loop)} in the loop between "
             "steps (the loss check, the metrics line, Python threads holding the GIL)"
             if loop else f"{_pct(idle)} idle between operators")
    return Finding("host_bound", e.who, (
        f"{e.subject} is host-bound: {_pct(idle + loop)} of its step is host time{ms}, "
        f"{parts} (above {_pct(IDLE_SHARE_HIGH)}): time the host spends rather than the "
        "ops running. Run fewer, larger ops: "
        + advise(e, Move("graph mode (runtime.mode=graph)", "runtime.mode", "graph"),
                 Move("fusion (runtime.jit_level=O1)", "runtime.jit_level", "O1"),
                 Move("a larger micro-batch (a larger global batch, or fewer "
                      "train.micro_batches where there are several)"),
                 Move("fewer runtime.threads if other work shares the cores")) + "."),
        {"idle_share": idle, "between_steps_share": loop})


def cast_overhead(e: Evidence) -> Finding | None:
    casts = [r for r in e.top_ops if r.type == CAST_OP]
    share = sum(r.share for r in casts)
    if share <= CAST_SHARE_HIGH:
        return None
    ms = sum(r.ms_per_step for r in casts)
    return Finding("cast_overhead", e.who, (
        f"{e.subject} spends {_pct(share)} of its step in {CAST_OP} operators ({ms:.2f} ms a "
        f"step; above {_pct(CAST_SHARE_HIGH)}): converting between precisions costs more than "
        "the lower precision saves. Try "
        + advise(e, Move("precision=fp32 (on the CPU fp16 is the slower one)", "precision",
                         "fp32"),
                 Move("keeping more of the model in one dtype")) + "."), {"cast_share": share})


RULES: tuple[Callable[[Evidence], Finding | None], ...] = (
    communication, data_wait, dominant_op, memory_peaks, slow_rank, host_bound, cast_overhead)


def diagnose(evidence: Evidence) -> list[Finding]:
    return [f for rule in RULES if (f := rule(evidence)) is not None]
