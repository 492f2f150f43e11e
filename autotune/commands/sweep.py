"""``python -m autotune sweep``: search the space (autotune/sweep.py), resuming the study."""

from __future__ import annotations

from omegaconf import DictConfig
from rich.console import Console

from autotune.sweep import Sweep


def run(composed: DictConfig, overrides: list[str], console: Console) -> int:
    return Sweep(composed, overrides, console).run().exit_code
