"""Statistics both sides share: the interval of a trial's median step time, and when
warm-up is over.

Numpy only, deterministic (a fixed bootstrap seed), so that the trial's stopping
rule and the orchestrator's reading of the same steps give the same numbers.

Why a bootstrap of the median: step times on a shared machine are skewed (a
context switch makes one step 2x slower, never 2x faster), so a t-interval of the
mean is too wide where the median is steady and too narrow where it is not.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: Resamples of every bootstrap: 2,000 keep the 95 % percentiles within ~1 % of their value.
N_BOOT = 2000
SEED = 20260
CONFIDENCE = 0.95


def bootstrap_medians(samples: Sequence[float], *, n_boot: int = N_BOOT,
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """Medians of ``n_boot`` resamples (with replacement) of ``samples``."""
    arr = np.asarray(samples, dtype=float)
    rng = rng or np.random.default_rng(SEED)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    return np.median(arr[idx], axis=1)


def median_interval(samples: Sequence[float], *, confidence: float = CONFIDENCE,
                    n_boot: int = N_BOOT) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median; (nan, nan) for fewer than 2 samples."""
    arr = np.asarray([s for s in samples if math.isfinite(s)], dtype=float)
    if arr.size < 2:
        return math.nan, math.nan
    medians = bootstrap_medians(arr, n_boot=n_boot)
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def relative_half_width(samples: Sequence[float], *, confidence: float = CONFIDENCE) -> float:
    """Half the interval of the median over the median (0.02 = +-2 %); inf when unknown."""
    lo, hi = median_interval(samples, confidence=confidence)
    return half_width_of(lo, hi, float(np.median(samples)) if len(samples) else math.nan)


def half_width_of(lo: float, hi: float, centre: float) -> float:
    """(hi - lo) / 2 / centre, or inf when the interval or the centre is unknown."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or not centre > 0:
        return math.inf
    return (hi - lo) / 2 / centre


def steady(step_times: Sequence[float], *, window: int, tolerance: float) -> bool:
    """Warm-up is over: the median of the last ``window`` steps is within ``tolerance``
    (relative) of the median of the ``window`` before, and not still falling beyond it.

    On CPU, MindSpore's first steps after compilation run ~30 % slower and then
    settle; the rule waits for two equal windows instead of a fixed count.
    """
    if window < 1 or len(step_times) < 2 * window:
        return False
    last = float(np.median(step_times[-window:]))
    before = float(np.median(step_times[-2 * window:-window]))
    return before > 0 and abs(last - before) / before <= tolerance
