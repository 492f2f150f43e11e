"""What a trial measured, as one typed record, and the one definition of each number in it.

Both sides read it: the trial writes it into its summary (``SummaryRecord.performance``,
a JSON object on the wire, :meth:`Performance.to_dict`), the orchestrator reads it back
(:meth:`Performance.from_dict`) from the metrics file, from Optuna's user attributes and
from stored repeats. Numpy only: no MindSpore, no Optuna.

The definitions, each in one function that every caller uses:

* **tokens/s** of a run (:func:`tokens_per_s`): tokens per step / its step time, the
  mean of its measured steps' periods (:func:`trials.contract.stats.step_time`, which
  says why the mean): the tokens it trained over the time they took.
* **pooling** repeated runs of one configuration (:func:`pooled_tokens_per_s`): the
  geometric mean of their tokens/s (speeds multiply; a log-scale mean).
* **a loss spike** (:func:`spike_limit`, :func:`loss_spikes`): a finite loss at or above
  ``factor`` x the median of the previous :data:`SPIKE_WINDOW` finite losses, judged once
  ``min_history`` of them exist. Causal, because the trainer's guard must decide before
  the update lands (the compiled step applies it only while ``loss < limit``); a running
  median, because a falling loss curve must never look like a spike against its own
  early, higher values (a whole-run median would flag the first steps of a fast fall).
* **MFU/HFU** (:func:`model_flops_utilization`, :func:`hardware_flops_utilization`).

Non-finite values travel as "nan"/"inf" strings (:mod:`trials.contract.jsonsafe`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trials.contract.jsonsafe import float_of, to_json
from trials.contract.stats import half_width_of, step_time, step_time_interval

#: A spike is judged against the median of this many previous finite losses...
SPIKE_WINDOW = 20
#: ...once at least this many exist (the guard's ``guard.spike_after_steps`` default).
SPIKE_MIN_HISTORY = 3


# -- the definitions -------------------------------------------------------------------------
def tokens_per_s(tokens_per_step: float | None, step_times_s: Iterable[float]) -> float | None:
    """Tokens per step / the run's step time; None without tokens or a positive step
    time."""
    times = positive_times(step_times_s)
    if not times or not tokens_per_step:
        return None
    return float(tokens_per_step) / step_time(times)


def positive_times(step_times_s: Iterable[Any]) -> list[float]:
    """The finite, positive step times (what every statistic of a run rests on)."""
    out = []
    for t in step_times_s:
        v = float_of(t)
        if math.isfinite(v) and v > 0:
            out.append(v)
    return out


def pooled_tokens_per_s(values: Iterable[float | None]) -> float | None:
    """Runs of one configuration pooled: the geometric mean of their positive tokens/s."""
    kept = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    if not kept:
        return None
    return math.exp(sum(math.log(v) for v in kept) / len(kept))


def spike_limit(previous_losses: Sequence[float], factor: float, *,
                min_history: int = SPIKE_MIN_HISTORY) -> float:
    """The loss at or above which the next step is a spike (inf while history is short)."""
    return _limit([v for v in previous_losses if math.isfinite(v)], factor, min_history)


def loss_spikes(losses: Sequence[float], factor: float, *,
                min_history: int = SPIKE_MIN_HISTORY) -> list[int]:
    """Indices of the losses that are spikes (:func:`spike_limit` of the ones before)."""
    history: list[float] = []
    out = []
    for i, loss in enumerate(losses):
        if not math.isfinite(loss):
            continue
        if loss >= _limit(history, factor, min_history):
            out.append(i)
        history.append(loss)
    return out


def _limit(finite_history: list[float], factor: float, min_history: int) -> float:
    if len(finite_history) < max(1, min_history) or not math.isfinite(factor):
        return math.inf
    return factor * float(np.median(finite_history[-SPIKE_WINDOW:]))


def model_flops_utilization(tokens_s: float, flops_per_token: float,
                            peak_flops: float) -> float:
    """MFU: model FLOPs per second over the hardware's peak (6N per token, no recompute)."""
    return tokens_s * flops_per_token / peak_flops


def hardware_flops_utilization(mfu: float, recompute: bool) -> float:
    """HFU: recompute repeats the forward pass (2N of the 6N), so hardware FLOPs are 8/6 x."""
    return mfu * (8.0 / 6.0) if recompute else mfu


# -- the record ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Performance:
    """The performance layer of a trial's scorecard. None: not measured (or not this run's
    kind: the communication fields exist only under data parallelism)."""

    #: Key names on disk and in Optuna user attributes, for modules that address a key.
    TOKENS_PER_S: ClassVar[str] = "tokens_per_s"
    TOKENS_PER_STEP: ClassVar[str] = "tokens_per_step"
    STEP_TIMES_S: ClassVar[str] = "step_times_s"
    STEP_TIME_MEDIAN_S: ClassVar[str] = "step_time_median_s"

    tokens_per_s: float | None = None
    #: 95 % bootstrap interval of tokens/s within this run (not across runs).
    tokens_per_s_low: float | None = None
    tokens_per_s_high: float | None = None
    #: Half that interval over the step time (0.02 = +-2 %).
    interval_half_width: float | None = None
    warmup_steps_used: int | None = None
    #: The measured step times: the samples the orchestrator's comparisons resample.
    step_times_s: tuple[float, ...] = ()
    tokens_per_step: float | None = None
    #: How the measured step times spread (the run's step time, the mean that tokens/s
    #: rests on, is :attr:`step_time_s`).
    step_time_median_s: float | None = None
    step_time_p10_s: float | None = None
    step_time_p90_s: float | None = None
    step_time_cv: float | None = None
    measured_steps: int | None = None
    compile_s: float | None = None
    #: Share of the measured steps' time spent waiting for input data.
    data_wait_share: float | None = None
    #: The pipeline probe, run after measuring (in no measured number; trials/trainer.py):
    #: samples/s the input pipeline delivers alone, samples/s the step consumes alone
    #: (fed one batch again and again), samples/s of the measured training steps, all
    #: summed over ranks; and the probe's own wall time (its overhead on the trial).
    pipeline_samples_per_s: float | None = None
    compute_samples_per_s: float | None = None
    samples_per_s: float | None = None
    probe_s: float | None = None
    #: What ``tokens_per_s`` counts: ``tokens``, or ``samples`` for a workload whose samples
    #: are not token sequences (``Workload.unit``; trials/contract/units.py); None: tokens.
    unit: str | None = None
    flops_per_token: float | None = None
    peak_flops: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    #: Set when MFU > 1: the profile's peak or the FLOPs model is wrong.
    mfu_error: str | None = None
    #: How ``peak_flops`` was obtained (the profile's figure, or the CPU GEMM: when, how,
    #: whether verified on a quiet host), and why MFU is not reported when it is not.
    peak_source: str | None = None
    mfu_unavailable: str | None = None
    #: Why warm-up ended and why measuring stopped (trials/measurement.py).
    warmup_end: str | None = None
    measure_stop: str | None = None
    #: dp > 1: every rank's step time and their spread.
    rank_step_s: tuple[float, ...] = ()
    rank_spread: float | None = None
    #: dp > 1: the gradient all-reduce timed alone after measuring, and its share of a step.
    comm_s: float | None = None
    allreduce_bytes: int | None = None
    comm_algbw_gbs: float | None = None
    comm_share: float | None = None
    #: Produced by the simulated trial program: a prediction, never a measurement.
    simulated: bool = False
    #: Keys this version does not know (a newer writer's, a repeat's ``source``): kept, so
    #: that reading and writing a record back loses nothing.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_step_times(cls, tokens_per_step: float, step_times_s: Iterable[float], *,
                        warmup_steps_used: int = 0) -> Performance:
        """Throughput of one run from its measured steps; an empty record without any."""
        times = np.asarray(positive_times(step_times_s))
        tps = tokens_per_s(tokens_per_step, times)
        if tps is None:
            return cls()
        # One bootstrap of the step time: tokens/s bounds swap (a slow step, few tokens/s).
        slow, fast = step_time_interval(times)
        return cls(
            tokens_per_s=tps,
            tokens_per_s_low=tokens_per_step / fast if fast > 0 else math.nan,
            tokens_per_s_high=tokens_per_step / slow if slow > 0 else math.nan,
            interval_half_width=half_width_of(slow, fast, step_time(times)),
            warmup_steps_used=warmup_steps_used,
            step_times_s=tuple(round(float(t), 6) for t in times),
            tokens_per_step=float(tokens_per_step),
            step_time_median_s=float(np.median(times)),
            step_time_p10_s=float(np.percentile(times, 10)),
            step_time_p90_s=float(np.percentile(times, 90)),
            step_time_cv=float(np.std(times) / np.mean(times)) if times.size > 1 else 0.0,
            measured_steps=int(times.size))

    def with_flops(self, *, flops_per_token: float | None, peak_flops: float | None,
                   recompute: bool) -> Performance:
        """MFU and HFU added where the FLOPs per token, the peak and tokens/s are known."""
        if not (flops_per_token and peak_flops and self.tokens_per_s is not None):
            return self
        mfu = model_flops_utilization(self.tokens_per_s, flops_per_token, peak_flops)
        error = (f"MFU {mfu:.2f} > 1: check the hardware profile's peak FLOP/s for this dtype "
                 "and the workload's flops_per_token") if mfu > 1.0 else None
        return dataclasses.replace(self, flops_per_token=flops_per_token, peak_flops=peak_flops,
                                   mfu=mfu, hfu=hardware_flops_utilization(mfu, recompute),
                                   mfu_error=error)

    @property
    def step_time_s(self) -> float | None:
        """The run's step time, the one its tokens/s rests on (tokens per step / tokens/s):
        a record written before 2026-12-05 reads as its median, as its tokens/s did."""
        if not (self.tokens_per_step and self.tokens_per_s):
            return None
        return self.tokens_per_step / self.tokens_per_s

    def replace(self, **changes: Any) -> Performance:
        """A copy with ``changes`` (field names only: a misspelt key raises TypeError)."""
        return dataclasses.replace(self, **changes)

    # -- JSON -----------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Performance:
        """The record of a JSON object; unknown keys are kept in ``extra``, a value of the
        wrong type reads as not measured (None) rather than failing the reader."""
        known, extra = {}, {}
        for key, value in (data or {}).items():
            convert = _CONVERTERS.get(key)
            if convert is None:
                extra[key] = value
            elif value is not None:
                try:
                    known[key] = convert(value)
                except (TypeError, ValueError):
                    continue
        return cls(**known, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (non-finite values as strings); unset fields are left out, as
        the wire format has always done (a reader's ``.get`` sees None)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None or value == () or (value is False and f.default is False):
                continue
            out[f.name] = value
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return to_json(out)

    def pick(self, names: Iterable[str]) -> dict[str, Any]:
        """Only ``names`` of :meth:`to_dict` (what a stored repeat keeps)."""
        full = self.to_dict()
        return {k: full[k] for k in names if k in full}

    # -- pooling --------------------------------------------------------------------------
    @classmethod
    def pool(cls, runs: Iterable[Performance | Mapping[str, Any] | None]) -> float | None:
        """tokens/s of runs of one configuration, pooled (:func:`pooled_tokens_per_s`)."""
        return pooled_tokens_per_s(
            (run if isinstance(run, Performance) else cls.from_dict(run)).tokens_per_s
            for run in runs if run is not None)


def _tuple(value: Any) -> tuple[float, ...]:
    return tuple(float_of(v) for v in value)


def _converter(annotation: str):
    if "tuple" in annotation:
        return _tuple
    if annotation.startswith("int"):
        return int
    if annotation.startswith("str"):
        return str
    if annotation.startswith("bool"):
        return bool
    return float_of


#: Field name -> how its JSON value is read (from the annotations: one place to add a field).
_CONVERTERS = {f.name: _converter(str(f.type)) for f in dataclasses.fields(Performance)
               if f.name != "extra"}
