"""The four-layer scorecard of a trial, computed from its step records.

Plain Python + numpy (part of the contract) so that the orchestrator computes
the same numbers from a metrics file whose trial it had to stop. Keys carry
their units.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trials.contract.events import Phase, StepRecord
from trials.contract.stats import half_width_of, median_interval


def _finite(values) -> list[float]:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def throughput(steps: list[StepRecord]) -> dict[str, float]:
    """tokens/s = tokens per step / median steady-state step time (MEASURE steps only)."""
    measured = [s for s in steps if s.phase is Phase.MEASURE]
    times = np.asarray(_finite(s.step_s for s in measured))
    if times.size == 0:
        return {}
    tokens = float(np.median(_finite(s.tokens for s in measured)))
    median = float(np.median(times))
    # One bootstrap of the median step time: tokens/s bounds swap (a slow step, few tokens/s).
    slow, fast = median_interval(times)
    return {
        "tokens_per_s": tokens / median,
        # 95 % bootstrap interval of tokens/s within this run (not across runs).
        "tokens_per_s_low": tokens / fast if fast > 0 else math.nan,
        "tokens_per_s_high": tokens / slow if slow > 0 else math.nan,
        "interval_half_width": half_width_of(slow, fast, median),
        "warmup_steps_used": sum(1 for s in steps if s.phase is Phase.WARMUP),
        # The samples the orchestrator's comparisons resample (stats.py, autotune/study/noise).
        "step_times_s": [round(float(t), 6) for t in times],
        "tokens_per_step": tokens,
        "step_time_median_s": median,
        "step_time_p10_s": float(np.percentile(times, 10)),
        "step_time_p90_s": float(np.percentile(times, 90)),
        "step_time_cv": float(np.std(times) / np.mean(times)) if times.size > 1 else 0.0,
        "measured_steps": int(times.size),
    }


def scorecard(steps: list[StepRecord], *, flops_per_token: float | None, peak_flops: float | None,
              recompute: bool, peak_rss_gib: list[float], budget_gib: float,
              spike_factor: float) -> dict[str, Any]:
    """Correctness, performance, stability and resources of one trial."""
    losses = _finite(s.loss for s in steps)
    norms = _finite(s.grad_norm for s in steps)
    perf = throughput(steps)
    compile_s = steps[0].step_s if steps and steps[0].phase is Phase.COMPILE else 0.0
    measured = [s for s in steps if s.phase is Phase.MEASURE]
    wait = _finite(s.data_wait_s for s in measured)
    step_sum = sum(_finite(s.step_s for s in measured))
    perf["compile_s"] = compile_s
    perf["data_wait_share"] = (sum(wait) / step_sum) if step_sum > 0 else 0.0
    if flops_per_token and peak_flops and "tokens_per_s" in perf:
        mfu = perf["tokens_per_s"] * flops_per_token / peak_flops
        perf["flops_per_token"] = flops_per_token
        perf["peak_flops"] = peak_flops
        perf["mfu"] = mfu
        # Recompute repeats the forward pass (2N of the 6N): hardware FLOPs are 8/6 x.
        perf["hfu"] = mfu * (8.0 / 6.0) if recompute else mfu
        if mfu > 1.0:  # impossible: the profile's peak is wrong, or the FLOPs model is
            perf["mfu_error"] = (f"MFU {mfu:.2f} > 1: check the hardware profile's peak "
                                 "FLOP/s for this dtype and the workload's flops_per_token")
    trend = float(np.polyfit(np.arange(len(losses)), losses, 1)[0]) if len(losses) > 2 else 0.0
    median_loss = float(np.median(losses)) if losses else float("nan")
    return {
        "correctness": {
            "loss_start": losses[0] if losses else None,
            "loss_end": losses[-1] if losses else None,
            "loss_trend_per_step": trend,
            "loss_falling": bool(len(losses) > 1 and losses[-1] < losses[0]),
            "grad_norm_median": float(np.median(norms)) if norms else None,
            "grad_norm_max": max(norms) if norms else None,
            "nonfinite_steps": len(steps) - len(losses),
        },
        "performance": perf,
        "stability": {
            "overflow_steps": sum(1 for s in steps if s.overflow),
            "skipped_updates": sum(1 for s in steps if not s.updated),
            "clipped_steps": sum(1 for s in steps if s.clipped),
            "loss_spikes": sum(1 for v in losses if v > spike_factor * median_loss),
        },
        "resources": {
            "peak_rss_gib_max_rank": max(peak_rss_gib) if peak_rss_gib else None,
            "peak_rss_gib_total": sum(peak_rss_gib) if peak_rss_gib else None,
            "peak_rss_gib_per_rank": list(peak_rss_gib),
            "memory_budget_gib": budget_gib,
        },
    }
