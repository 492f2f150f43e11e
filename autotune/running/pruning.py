"""The slow rule: stop a trial that is clearly slower than the best one so far.

Two bars, because warm-up steps can be much slower than steady state (a data-parallel
trial measured 2x slower in warm-up than in its measured steps, where it was the
fastest): during warm-up only a trial far behind (``slow_warmup_ratio``) is stopped;
once measured steps exist they are judged against ``slow_ratio``.
"""

from __future__ import annotations

import dataclasses

from autotune.settings import StopRules
from trials.contract.events import Phase, StepRecord
from trials.contract.scorecard import throughput


def estimate(steps: list[StepRecord]) -> tuple[float | None, int, bool]:
    """(tokens/s, steps it rests on, from measured steps?) of a running trial."""
    measured = throughput(steps)
    if measured:
        return measured["tokens_per_s"], measured["measured_steps"], True
    settled = [dataclasses.replace(s, phase=Phase.MEASURE) for s in steps
               if s.phase is not Phase.COMPILE]
    if not settled:
        return None, 0, False
    return throughput(settled)["tokens_per_s"], len(settled), False


def slow_verdict(steps: list[StepRecord], best: float | None, rules: StopRules) -> str | None:
    """Why the trial should stop as slow, or None."""
    tps, n, is_measured = estimate(steps)
    if tps is None or not best or n < rules.slow_min_steps:
        return None
    ratio = rules.slow_ratio if is_measured else rules.slow_warmup_ratio
    if tps >= ratio * best:
        return None
    where = "measured" if is_measured else "warm-up"
    return f"{tps:,.0f} tok/s after {n} {where} steps < {ratio:g} x best {best:,.0f}"
