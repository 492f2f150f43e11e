"""Statistics both sides share: a run's step time, its interval, and when warm-up is over.

Numpy only, deterministic (a fixed bootstrap seed), so that the trial's stopping
rule and the orchestrator's reading of the same steps give the same numbers.

**A run's step time is the mean of its measured periods** (:func:`step_time`): its
tokens/s is then the tokens it trained over the time it took, what the run gets. Until
2026-12-05 it was the median, on the reading that a context switch makes one step slower,
never faster. But steps are not one level plus outliers: on a data-bound workload the
periods take two levels (about 23 ms, and 60-110 ms while augmentation threads share the
cores), interleaved through each run, and the median reads whichever holds more than half
the steps. Over the three runs a point of the recorded image_cnn landscape, run-to-run
spread of tokens/s is 13.5 % for the mean against 19.7 % for the median (119 degrees of
freedom); on the GPT landscape's repeated points 5.6 % against 7.4 % (BENCHMARKS.md,
"A run's step time is the mean of its periods"). A load that slows some steps is a
condition of the host, which the sweep measures and judges apart
(autotune/running/conditions.py).

The interval is a percentile bootstrap of that mean: step times on a shared machine are
skewed and serially uneven, where a t-interval assumes neither.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: Resamples of every bootstrap: 2,000 keep the 95 % percentiles within ~1 % of their value.
N_BOOT = 2000
SEED = 20260
CONFIDENCE = 0.95


def step_time(samples: Sequence[float]) -> float:
    """A run's step time: the mean of its step times (nan without any)."""
    arr = np.asarray(samples, dtype=float)
    return float(arr.mean()) if arr.size else math.nan


def bootstrap_step_times(samples: Sequence[float], *, n_boot: int = N_BOOT,
                         rng: np.random.Generator | None = None) -> np.ndarray:
    """:func:`step_time` of ``n_boot`` resamples (with replacement) of ``samples``."""
    arr = np.asarray(samples, dtype=float)
    rng = rng or np.random.default_rng(SEED)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    return arr[idx].mean(axis=1)


def step_time_interval(samples: Sequence[float], *, confidence: float = CONFIDENCE,
                       n_boot: int = N_BOOT) -> tuple[float, float]:
    """Percentile-bootstrap interval of :func:`step_time`; (nan, nan) for fewer than 2."""
    arr = np.asarray([s for s in samples if math.isfinite(s)], dtype=float)
    if arr.size < 2:
        return math.nan, math.nan
    draws = bootstrap_step_times(arr, n_boot=n_boot)
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))


def relative_half_width(samples: Sequence[float], *, confidence: float = CONFIDENCE) -> float:
    """Half the interval of the step time over the step time (0.02 = +-2 %); inf when
    unknown."""
    lo, hi = step_time_interval(samples, confidence=confidence)
    return half_width_of(lo, hi, step_time(samples))


def half_width_of(lo: float, hi: float, centre: float) -> float:
    """(hi - lo) / 2 / centre, or inf when the interval or the centre is unknown."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or not centre > 0:
        return math.inf
    return (hi - lo) / 2 / centre


def steady(step_times: Sequence[float], *, window: int, tolerance: float) -> bool:
    """Warm-up is over: the step time of the last ``window`` steps is within ``tolerance``
    (relative) of the step time of the ``window`` before.

    On CPU, MindSpore's first steps after compilation run ~30 % slower and then
    settle; the rule waits for two equal windows instead of a fixed count.
    """
    if window < 1 or len(step_times) < 2 * window:
        return False
    last = step_time(step_times[-window:])
    before = step_time(step_times[-2 * window:-window])
    return before > 0 and abs(last - before) / before <= tolerance
