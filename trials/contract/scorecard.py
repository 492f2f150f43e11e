"""The four-layer scorecard of a trial, computed from its step records.

Plain Python + numpy (part of the contract) so that the orchestrator computes
the same numbers from a metrics file whose trial it had to stop. Keys carry
their units; the performance layer is a :class:`~trials.contract.performance.Performance`
(written as its JSON object), and every number in it is defined there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trials.contract.events import Phase, StepRecord
from trials.contract.jsonsafe import float_of
from trials.contract.performance import SPIKE_MIN_HISTORY, Performance, loss_spikes


def _finite(values) -> list[float]:
    return [v for v in map(float_of, values) if math.isfinite(v)]


def throughput(steps: list[StepRecord]) -> Performance:
    """tokens/s of the MEASURE steps (:meth:`Performance.from_step_times`); an empty
    record when there are none."""
    measured = [s for s in steps if s.phase is Phase.MEASURE]
    tokens = _finite(s.tokens for s in measured)
    if not tokens:
        return Performance()
    return Performance.from_step_times(
        float(np.median(tokens)), (s.step_s for s in measured),
        warmup_steps_used=sum(1 for s in steps if s.phase is Phase.WARMUP))


def scorecard(steps: list[StepRecord], *, flops_per_token: float | None, peak_flops: float | None,
              recompute: bool, peak_rss_gib: list[float], budget_gib: float,
              spike_factor: float,
              spike_after_steps: int = SPIKE_MIN_HISTORY, peak_source: str | None = None,
              peak_missing: str | None = None) -> dict[str, Any]:
    """Correctness, performance, stability and resources of one trial.

    ``spike_factor``/``spike_after_steps``: the trainer's guard (``guard.*``), so the spikes
    counted here are the steps that guard judged as spikes (:func:`loss_spikes`).
    ``peak_source``: how ``peak_flops`` was obtained; ``peak_missing``: why there is none
    (MFU is then reported as not available, with that reason, rather than invented).
    """
    losses = _finite(s.loss for s in steps)
    norms = _finite(s.grad_norm for s in steps)
    compile_s = steps[0].step_s if steps and steps[0].phase is Phase.COMPILE else 0.0
    measured = [s for s in steps if s.phase is Phase.MEASURE]
    wait = _finite(s.data_wait_s for s in measured)
    step_sum = sum(_finite(s.step_s for s in measured))
    perf = throughput(steps).replace(
        compile_s=compile_s, data_wait_share=(sum(wait) / step_sum) if step_sum > 0 else 0.0)
    perf = perf.with_flops(flops_per_token=flops_per_token, peak_flops=peak_flops,
                           recompute=recompute)
    if perf.mfu is not None:
        perf = perf.replace(peak_source=peak_source)
    elif peak_missing and flops_per_token and perf.tokens_per_s is not None:
        perf = perf.replace(mfu_unavailable=peak_missing)
    trend = float(np.polyfit(np.arange(len(losses)), losses, 1)[0]) if len(losses) > 2 else 0.0
    return {
        "correctness": {
            "loss_start": losses[0] if losses else None,
            "loss_end": losses[-1] if losses else None,
            "loss_trend_per_step": trend,
            "loss_falling": bool(len(losses) > 1 and losses[-1] < losses[0]),
            "grad_norm_median": float(np.median(norms)) if norms else None,
            "grad_norm_max": max(norms) if norms else None,
            "nonfinite_steps": len(steps) - len(losses),
            "finite_loss_steps": len(losses),
        },
        "performance": perf.to_dict(),
        "stability": {
            "overflow_steps": sum(1 for s in steps if s.overflow),
            "skipped_updates": sum(1 for s in steps if not s.updated),
            "clipped_steps": sum(1 for s in steps if s.clipped),
            "loss_spikes": len(loss_spikes([s.loss for s in steps], spike_factor,
                                           min_history=spike_after_steps)),
        },
        "resources": {
            "peak_rss_gib_max_rank": max(peak_rss_gib) if peak_rss_gib else None,
            "peak_rss_gib_total": sum(peak_rss_gib) if peak_rss_gib else None,
            "peak_rss_gib_per_rank": list(peak_rss_gib),
            "memory_budget_gib": budget_gib,
        },
    }
