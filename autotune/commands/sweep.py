"""``python -m autotune sweep``: search the space (autotune/sweep.py), resuming the study."""

from __future__ import annotations

from omegaconf import DictConfig
from rich.console import Console

from autotune.settings import SweepConfig
from autotune.sweep import Sweep
from autotune.sweep_context import SweepContext

#: What ``autotune`` says when it is stopped during a sweep (autotune/signals.py).
STOPPED = ("the running trial was killed and re-queued: run the same command again to "
           "resume")


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return Sweep(SweepContext.build(composed, config, overrides), console).run().exit_code
