"""This machine's identity and its cached CPU peak FLOP/s (measured by trials/calibrate.py).

Plain Python, so that the orchestrator's cost model reads the same cache the trial
program writes, without importing MindSpore.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

PEAK_CACHE_NAME = "peak_flops.json"


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


def default_cache_dir() -> Path:
    return Path(os.environ.get("AUTOTUNE_CACHE", Path.home() / ".cache" / "autotune"))


def read_peak_cache(cache_dir: Path) -> dict[str, float]:
    try:
        return json.loads((cache_dir / PEAK_CACHE_NAME).read_text())
    except (OSError, ValueError):
        return {}


def cached_cpu_peak_flops(dtype_name: str, cache_dir: Path | None = None) -> float | None:
    """The calibrated peak FLOP/s of this machine for a dtype, or None if never measured."""
    value = read_peak_cache(cache_dir or default_cache_dir()).get(f"{machine_key()}|{dtype_name}")
    return float(value) if value else None
