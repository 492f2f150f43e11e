"""Peak FLOP/s of this machine per dtype, measured by a GEMM and cached.

The CPU peak is not hard-coded: it is what MindSpore's own matmul reaches here
(shared/mindspore-cpu.md: ~275 GFLOP/s fp32 on 2 cores). Run once per machine,
per dtype, and cached as JSON under the cache directory.

    python -m trials.calibrate            # prints and caches the fp32/fp16 peaks
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

CACHE_NAME = "peak_flops.json"


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key() -> str:
    return f"{cpu_model()}|cores={os.cpu_count()}"


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
    path = cache_dir / CACHE_NAME
    key = f"{machine_key()}|{dtype_name}"
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if key not in cache:
        cache[key] = measure_gemm_flops(dtype_name)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.time_ns()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(path)
    return float(cache[key])


if __name__ == "__main__":
    from trials.runtime_setup import default_cache_dir

    for name in ("float32", "float16"):
        print(f"{name}: {peak_flops(name, default_cache_dir()) / 1e9:.1f} GFLOP/s")
