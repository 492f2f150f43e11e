"""Peak FLOP/s of this machine per dtype, measured by a GEMM on a quiet host and cached.

The CPU peak is not hard-coded: it is what MindSpore's own matmul reaches here. A figure
measured while other jobs share the cores is wrong by as much as they take (a peak
measured under load made MFU 2-3x too high), so a figure is stored only when it passes
the quiet-host rule:

* an **attempt** times an n x n x n GEMM (n = 1024) again and again for at least
  :data:`WINDOW_S` (1 s, and :data:`MIN_REPEATS` times), and on while its fastest
  repeats disagree (``calibrate-host``: up to :data:`MAX_WINDOW_S`), while
  :class:`LoadMeter` measures the cores the *other* processes used (steal included);
* it is **accepted** when those used at most :data:`MAX_LOAD_SHARE` of the cores (10 %:
  0.2 of 2 cores; ``$AUTOTUNE_PEAK_MAX_LOAD`` sets another share, for a host that is
  never quiet) and the :data:`AGREE` fastest repeats agree within :data:`SPREAD_LIMIT`
  (3 %); the figure is the fastest repeat's;
* otherwise the next attempt follows :data:`PAUSE_S` later; when none passes the figure
  is **refused**: nothing is stored and MFU is reported as not available, with the reason.

A trial measures once (one attempt) when the cache has no verified figure; ``python -m
autotune calibrate-host`` re-measures with up to :data:`COMMAND_ATTEMPTS` attempts.
Accelerator profiles state their peak per dtype instead (``hardware.peak_tflops``).

    python -m trials.calibrate                     # re-measures fp32 and fp16, stores what passes
    python -m trials.calibrate --dtype float32 --out result.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import heapq
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trials.cache import cache_dir, default_cache_dir
from trials.contract.hostload import LoadMeter
from trials.contract.machine import PeakEntry, cached_peak, peak_key, write_peak_entry
from trials.contract.schema import Backend, TrialConfig

GEMM_N = 1024
#: An attempt lasts at least this long: /proc/stat counts 10 ms ticks, so about a second
#: gives the other processes' load to a few hundredths of a core.
WINDOW_S = 1.0
MIN_REPEATS = 5
#: Accepted when the AGREE fastest repeats are within SPREAD_LIMIT of the fastest...
AGREE = 3
SPREAD_LIMIT = 0.03
#: ...and other processes used at most this share of the cores (env: another share).
MAX_LOAD_SHARE = 0.10
MAX_LOAD_ENV = "AUTOTUNE_PEAK_MAX_LOAD"
#: Attempts of ``calibrate-host`` (a trial makes one), each timing on up to MAX_WINDOW_S
#: while the fastest repeats disagree (a trial's stops at WINDOW_S), and their pause.
COMMAND_ATTEMPTS = 5
MAX_WINDOW_S = 5.0
PAUSE_S = 2.0

#: Times one GEMM, in seconds.
GemmTimer = Callable[[], float]


@dataclass(frozen=True)
class Attempt:
    """One attempt: its GEMM times (fastest first) and the other processes' cores."""

    times_s: tuple[float, ...]
    load_cores: float

    @property
    def spread(self) -> float:
        """How much slower the AGREE-th fastest repeat is than the fastest."""
        return _spread(list(self.times_s[:AGREE]))


@dataclass(frozen=True)
class Calibration:
    """A measurement: the figure with how it was measured, and why it was refused (None:
    accepted, ``entry.verified`` is then True)."""

    entry: PeakEntry
    refused: str | None = None


def max_load_cores(share: float | None = None) -> float:
    """Cores the other processes may use during an accepted attempt."""
    if share is None:
        share = float(os.environ.get(MAX_LOAD_ENV) or MAX_LOAD_SHARE)
    return share * (os.cpu_count() or 1)


def run_attempt(gemm: GemmTimer, *, window_s: float = WINDOW_S,
                max_window_s: float | None = None,
                meter: Callable[[], LoadMeter] = LoadMeter) -> Attempt:
    """Time ``gemm`` for at least window_s and MIN_REPEATS times, then on (up to
    max_window_s) while the fastest repeats disagree; measuring the load all along."""
    load = meter()
    start = time.perf_counter()
    times: list[float] = []
    while True:
        times.append(gemm())
        elapsed = time.perf_counter() - start
        if len(times) < MIN_REPEATS or elapsed < window_s:
            continue
        if elapsed >= (max_window_s or window_s) or _spread(heapq.nsmallest(AGREE, times)) \
                <= SPREAD_LIMIT:
            break
    used = load.stop()
    return Attempt(tuple(sorted(times)), used["foreign_cores"] + used["steal_cores"])


def _spread(fastest: list[float]) -> float:
    return fastest[-1] / fastest[0] - 1.0


def measure(dtype_name: str, *, gemm: GemmTimer | None = None, n: int = GEMM_N,
            attempts: int = 1, window_s: float = WINDOW_S, max_window_s: float | None = None,
            max_load_share: float | None = None, pause_s: float = PAUSE_S,
            meter: Callable[[], LoadMeter] = LoadMeter,
            sleep: Callable[[float], None] = time.sleep) -> Calibration:
    """Attempts until one passes the quiet-host rule (module docstring), at most
    ``attempts``; ``gemm`` defaults to MindSpore's matmul of n x n ``dtype_name``."""
    gemm = gemm or gemm_timer(dtype_name, n)
    limit = max_load_cores(max_load_share)
    cores = os.cpu_count() or 1
    tried: list[Attempt] = []
    for number in range(1, attempts + 1):
        if number > 1:
            sleep(pause_s)
        attempt = run_attempt(gemm, window_s=window_s, max_window_s=max_window_s, meter=meter)
        tried.append(attempt)
        if attempt.load_cores <= limit and attempt.spread <= SPREAD_LIMIT:
            break
    # Accepted: the last attempt; refused: the quietest one, to say how loaded it was.
    shown = tried[-1] if _passes(tried[-1], limit) else min(tried, key=lambda a: a.load_cores)
    entry = PeakEntry(
        flops=2.0 * n**3 / shown.times_s[0], verified=_passes(shown, limit),
        measured_at=dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        dtype=dtype_name, gemm_n=n, repeats=len(shown.times_s), attempts=len(tried),
        spread=round(shown.spread, 4), load_cores=round(shown.load_cores, 3),
        max_load_cores=round(limit, 3), cores=cores)
    return Calibration(entry, None if entry.verified else _refusal(shown, limit, len(tried)))


def _passes(attempt: Attempt, limit: float) -> bool:
    return attempt.load_cores <= limit and attempt.spread <= SPREAD_LIMIT


def _refusal(attempt: Attempt, limit: float, n_attempts: int) -> str:
    tries = f"{n_attempts} attempt{'s' * (n_attempts > 1)}"
    if attempt.load_cores > limit:
        return (f"the host was loaded: other processes used {attempt.load_cores:.2f} cores "
                f"(limit {limit:.2f} of {os.cpu_count()}) during the GEMM, in {tries}")
    return (f"the GEMM repeats disagreed: the {AGREE}rd fastest was "
            f"{100 * attempt.spread:.1f} % slower than the fastest (limit "
            f"{100 * SPREAD_LIMIT:g} %), in {tries}")


def gemm_timer(dtype_name: str, n: int = GEMM_N) -> GemmTimer:
    """One compiled n x n x n matmul of MindSpore, timed per call (compiled here)."""
    import mindspore as ms
    import numpy as np
    from mindspore import ops

    dtype = getattr(ms, dtype_name)
    a = ms.Tensor(np.random.default_rng(0).standard_normal((n, n)), dtype)
    b = ms.Tensor(np.random.default_rng(1).standard_normal((n, n)), dtype)

    @ms.jit
    def gemm(x, y):
        return ops.matmul(x, y)

    gemm(a, b).asnumpy()  # compile

    def timed() -> float:
        start = time.perf_counter()
        gemm(a, b).asnumpy()
        return time.perf_counter() - start

    return timed


def calibrate(dtype_name: str, cache: Path, **options) -> tuple[Calibration, Path | None]:
    """Measure (:func:`measure`) and store an accepted figure; (the measurement, where it
    was stored or None when refused)."""
    result = measure(dtype_name, **options)
    if result.refused is not None:
        return result, None
    return result, write_peak_entry(cache, peak_key(dtype_name), result.entry)


@dataclass(frozen=True)
class PeakUsed:
    """The peak a trial's MFU uses: the figure and how it was obtained, or why there is
    none (then MFU is not reported)."""

    flops: float | None
    source: str | None = None
    missing: str | None = None


def peak_for(cfg: TrialConfig, **options) -> PeakUsed:
    """Peak FLOP/s of one device for the precision in use, times the devices used.

    The profile's number where it has one; on the CPU (null) the verified GEMM
    calibration, which already covers every core, so it is not multiplied. Without one,
    a trial that runs alone on every core (one rank, default threads) measures it once;
    ``options``: :func:`measure`'s, for tests.
    """
    dtype = cfg.precision.dtype.value
    tflops = cfg.hardware.peak_tflops.get(dtype)
    if tflops is not None:
        return PeakUsed(float(tflops) * 1e12 * cfg.parallel.devices,
                        source=f"hardware profile {cfg.hardware.name}: peak_tflops.{dtype}")
    if cfg.hardware.backend is not Backend.CPU:
        return PeakUsed(None, missing=f"hardware profile {cfg.hardware.name} states no "
                                      f"peak_tflops for {dtype}")
    cache = cache_dir(cfg)
    entry = cached_peak(dtype, cache)
    if entry is not None and entry.verified:
        return PeakUsed(entry.flops, source=entry.describe())
    fix = "run `python -m autotune calibrate-host` on a quiet host"
    have = "an unverified old figure" if entry is not None else "none"
    if cfg.parallel.devices > 1 or cfg.runtime.threads > 0:
        # Its ranks or its thread limit would make the GEMM measure a share of the cores.
        return PeakUsed(None, missing=f"no verified CPU peak for {dtype} ({have} cached) and "
                                      "this trial cannot measure one (it does not run alone "
                                      f"on every core): {fix}")
    try:
        result, _ = calibrate(dtype, cache, **options)
    except (RuntimeError, TypeError, ValueError) as exc:
        return PeakUsed(None, missing=f"the GEMM does not run in {dtype} here ({exc})")
    if result.refused is not None:
        return PeakUsed(None, missing=f"CPU peak for {dtype} not measured: {result.refused}; "
                                      f"{fix}")
    return PeakUsed(result.entry.flops, source=result.entry.describe())


def main(argv: list[str] | None = None) -> int:
    """Re-measure; 0 when every dtype that runs here was stored, 1 when one was refused."""
    parser = argparse.ArgumentParser(prog="python -m trials.calibrate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", nargs="+", default=["float32", "float16"])
    parser.add_argument("--attempts", type=int, default=COMMAND_ATTEMPTS)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    cache = args.cache_dir or default_cache_dir()
    results, code = [], 0
    for name in args.dtype:
        try:
            result, stored = calibrate(name, cache, attempts=args.attempts,
                                       max_window_s=MAX_WINDOW_S)
        except (RuntimeError, TypeError, ValueError) as exc:
            results.append({"dtype": name, "error": f"the GEMM does not run here ({exc})"})
            print(f"{name}: the GEMM does not run here ({exc})", flush=True)
            continue
        code = code or int(stored is None)
        results.append({"dtype": name, "entry": result.entry.to_json(),
                        "refused": result.refused, "stored": str(stored) if stored else None})
        figure = f"{name}: {result.entry.flops / 1e9:.1f} GFLOP/s"
        print(f"{figure} stored in {stored}" if stored else
              f"{figure} refused: {result.refused}", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps({"results": results}, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
