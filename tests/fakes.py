"""Built inputs for unit tests: a TrialRecord as load_records would build it, a hardware
profile as the sweep composes it."""

from __future__ import annotations

import functools

from autotune.settings import SweepConfig
from autotune.study.records import TrialRecord
from trials.contract.compose import compose
from trials.contract.outcomes import Outcome
from trials.contract.schema import HardwareConfig, TrialConfig, to_trial_config


def rec(number: int, reason: str = "ok", *, params: dict | None = None,
        tokens_per_s: float | None = None, card: dict | None = None, **fields) -> TrialRecord:
    """A TrialRecord; anything not given is unknown."""
    values = dict(number=number, state=Outcome(reason).state, params=params or {},
                  reason=Outcome(reason), detail="", launched=True, role="sampled",
                  tokens_per_s=tokens_per_s, mfu=None, peak_memory_gib=None, step_time_s=None,
                  compile_s=None, data_wait_share=None, micro_batch_size=None, started=None,
                  wall_s=None, trial_dir=None, reused_from=None, scorecard=card or {},
                  attrs={})
    values.update(fields)
    return TrialRecord(**values)


@functools.cache
def trial_config(*overrides: str) -> TrialConfig:
    """The trial config the sweep's config composes to with ``overrides``
    (``"hardware=gpu_a100"``...); composed once per test process, when a test first asks (a
    Hydra compose is ~0.5 s, and at import it would run in every pytest process that
    collects the module). Shared: change a copy (``dataclasses.replace``), never it."""
    return to_trial_config(compose("sweep", list(overrides), schema=SweepConfig))


def hardware_profile(*overrides: str) -> HardwareConfig:
    """The hardware profile of :func:`trial_config`."""
    return trial_config(*overrides).hardware
