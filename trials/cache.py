"""Where a trial keeps what outlives it: MindRecord caches and the CPU peak calibration."""

from __future__ import annotations

import os
from pathlib import Path

from trials.contract.schema import TrialConfig


def default_cache_dir() -> Path:
    return Path(os.environ.get("AUTOTUNE_CACHE", Path.home() / ".cache" / "autotune"))


def cache_dir(cfg: TrialConfig) -> Path:
    """``data.cache_dir`` where set, else ``$AUTOTUNE_CACHE`` or ``~/.cache/autotune``."""
    return Path(cfg.data.cache_dir) if cfg.data.cache_dir else default_cache_dir()
