"""Where a trial keeps what outlives it: MindRecord caches and the CPU peak calibration."""

from __future__ import annotations

from pathlib import Path

from trials.contract.machine import default_cache_dir
from trials.contract.schema import TrialConfig

__all__ = ["cache_dir", "default_cache_dir"]


def cache_dir(cfg: TrialConfig) -> Path:
    """``data.cache_dir`` where set, else ``$AUTOTUNE_CACHE`` or ``~/.cache/autotune``."""
    return Path(cfg.data.cache_dir) if cfg.data.cache_dir else default_cache_dir()
