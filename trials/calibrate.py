"""Peak FLOP/s of this machine per dtype, measured by a GEMM and cached.

The CPU peak is not hard-coded: it is what MindSpore's own matmul reaches here
(~275 GFLOP/s fp32 on a 2-core Xeon, measured with MindSpore 2.10). Run once per
machine, per dtype, and cached as JSON under the cache directory. Accelerator
profiles state their peak per dtype instead (``hardware.peak_tflops``).

    python -m trials.calibrate            # prints and caches the fp32/fp16 peaks
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from trials.cache import cache_dir, default_cache_dir
from trials.contract.machine import PEAK_CACHE_NAME, machine_key, read_peak_cache
from trials.contract.schema import Backend, TrialConfig


def measure_gemm_flops(dtype_name: str, n: int = 1024, repeats: int = 5) -> float:
    """Best-of-``repeats`` FLOP/s of an n x n x n matmul compiled by MindSpore."""
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
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        gemm(a, b).asnumpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


def peak_flops(dtype_name: str, cache_dir: Path) -> float:
    """Cached peak FLOP/s for dtype on this machine; measures on first use."""
    path = cache_dir / PEAK_CACHE_NAME
    key = f"{machine_key()}|{dtype_name}"
    cache = read_peak_cache(cache_dir)
    if key not in cache:
        cache[key] = measure_gemm_flops(dtype_name)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.time_ns()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(path)
    return float(cache[key])


def peak_flops_for(cfg: TrialConfig) -> float | None:
    """Peak FLOP/s of one device for the precision in use, times the devices used.

    The profile's number where it has one; on the CPU (null) a cached GEMM
    calibration, which already covers every core, so it is not multiplied.
    """
    dtype = cfg.precision.dtype.value
    tflops = cfg.hardware.peak_tflops.get(dtype)
    if tflops is not None:
        return float(tflops) * 1e12 * cfg.parallel.devices
    if cfg.hardware.backend is not Backend.CPU:
        return None
    try:
        return peak_flops(dtype, cache_dir(cfg))
    except (RuntimeError, TypeError, ValueError):
        return None  # no such dtype here: MFU is not reported rather than invented


if __name__ == "__main__":
    for name in ("float32", "float16"):
        print(f"{name}: {peak_flops(name, default_cache_dir()) / 1e9:.1f} GFLOP/s")
