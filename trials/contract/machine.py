"""This machine's identity and its cached CPU peak FLOP/s (measured by trials/calibrate.py).

Plain Python, so that the orchestrator's cost model reads the same cache the trial
program writes, without importing MindSpore.

The cache (``peak_flops.json`` in the cache directory) maps ``"<cpu>|cores=<n>|<dtype>"``
to an entry that says how the figure was measured (:class:`PeakEntry`): the value, the
date, the GEMM size and repeats, their spread and the other processes' load during it.
An entry of the old format (a bare number) is read as *unverified*: when and under what
load it was measured is unknown, so it is not used, and it is measured again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def peak_key(dtype_name: str) -> str:
    """This machine's key in the peak cache for one dtype."""
    return f"{machine_key()}|{dtype_name}"


def default_cache_dir() -> Path:
    return Path(os.environ.get("AUTOTUNE_CACHE", Path.home() / ".cache" / "autotune"))


@dataclass(frozen=True)
class PeakEntry:
    """One cached peak: the figure and how it was measured."""

    flops: float
    #: Measured by the quiet-host rule (trials/calibrate.py); False for an old bare number.
    verified: bool = False
    #: When (ISO 8601, local time with its offset).
    measured_at: str | None = None
    dtype: str | None = None
    #: The GEMM: n x n times n x n; the timed repeats of the accepted attempt, and the
    #: attempts it took.
    gemm_n: int | None = None
    repeats: int | None = None
    attempts: int | None = None
    #: How much slower the 3rd-fastest repeat was than the fastest (0.01 = 1 %).
    spread: float | None = None
    #: Cores used by other processes (steal included) during the accepted attempt, the
    #: limit it had to stay under, and the machine's cores.
    load_cores: float | None = None
    max_load_cores: float | None = None
    cores: int | None = None

    @classmethod
    def from_json(cls, value: Any) -> PeakEntry | None:
        """An entry of either format; None for one that is not a positive figure."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(flops=float(value)) if value > 0 else None  # old format: unverified
        if not isinstance(value, dict):
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        try:
            entry = cls(**{k: v for k, v in value.items() if k in known})
            return entry if float(entry.flops) > 0 else None
        except (TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """How the figure was measured, in one phrase (for the report and the console)."""
        if self.measured_at is None:
            return ("unverified: an old cache entry (a bare number), measured at an unknown "
                    "time under unknown load")
        how = (f"{self.dtype} GEMM {self.gemm_n}^3, fastest of {self.repeats} repeats "
               f"(spread {100 * (self.spread or 0):.1f} %), measured {self.measured_at}, "
               f"other load {self.load_cores or 0:.2f} of {self.cores} cores")
        return f"{how}: {'verified' if self.verified else 'unverified'}"


def read_peak_cache(cache_dir: Path) -> dict[str, PeakEntry]:
    """Every readable entry of the cache (old bare numbers as unverified entries)."""
    entries = {}
    for key, value in _read_raw(cache_dir).items():
        entry = PeakEntry.from_json(value)
        if entry is not None:
            entries[key] = entry
    return entries


def write_peak_entry(cache_dir: Path, key: str, entry: PeakEntry) -> Path:
    """Store one entry, keeping the others; atomic (a reader never sees half a file)."""
    path = cache_dir / PEAK_CACHE_NAME
    cache = _read_raw(cache_dir)
    cache[key] = entry.to_json()
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{time.time_ns()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1))
    tmp.replace(path)
    return path


def cached_peak(dtype_name: str, cache_dir: Path | None = None) -> PeakEntry | None:
    """This machine's cached entry for a dtype (verified or not), or None."""
    return read_peak_cache(cache_dir or default_cache_dir()).get(peak_key(dtype_name))


def cached_cpu_peak_flops(dtype_name: str, cache_dir: Path | None = None) -> float | None:
    """The verified peak FLOP/s of this machine for a dtype, or None if never measured
    on a quiet host (an old unverified figure is not used: it may be 2-3x too low)."""
    entry = cached_peak(dtype_name, cache_dir)
    return entry.flops if entry is not None and entry.verified else None


def _read_raw(cache_dir: Path) -> dict[str, Any]:
    try:
        raw = json.loads((cache_dir / PEAK_CACHE_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}
