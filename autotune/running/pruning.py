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


def estimate(steps: list[StepRecord], warmup_floor: int = 0) -> tuple[float | None, int, bool]:
    """(tokens/s, steps it rests on, judged as measured?) of a running trial.

    Measured steps first; else the warm-up steps past the trial's warm-up floor
    (``run.warmup_steps``), which count as measured once there are ``slow_min_steps`` of
    them: a trial whose warm-up runs on because its step time is not steady is judged
    like one that measures; else every warm-up step, against the lenient warm-up bar.
    """
    measured = throughput(steps)
    if measured.tokens_per_s is not None:
        return measured.tokens_per_s, measured.measured_steps, True
    warm = [dataclasses.replace(s, phase=Phase.MEASURE) for s in steps
            if s.phase is Phase.WARMUP]
    past_floor = warm[warmup_floor:] if warmup_floor > 0 else []
    if past_floor:
        return throughput(past_floor).tokens_per_s, len(past_floor), True
    if not warm:
        return None, 0, False
    return throughput(warm).tokens_per_s, len(warm), False


def slow_verdict(steps: list[StepRecord], best: float | None, rules: StopRules,
                 warmup_floor: int = 0) -> str | None:
    """Why the trial should stop as slow, or None."""
    tps, n, is_measured = estimate(steps, warmup_floor)
    # Not on one step, even 10x behind: a 20 ms step of a tiny model hiccups to 200 ms
    # on a busy machine (a test's trial was stopped so).
    if tps is None or not best or n < rules.slow_min_steps:
        return None
    ratio = rules.slow_ratio if is_measured else rules.slow_warmup_ratio
    if tps >= ratio * best:
        return None
    where = ("measured" if steps[-1].phase is Phase.MEASURE else
             "steady-enough warm-up" if is_measured else "warm-up")
    return f"{tps:,.0f} tok/s after {n} {where} steps < {ratio:g} x best {best:,.0f}"
