"""Built records for unit tests: a TrialRecord as load_records would build it."""

from __future__ import annotations

from autotune.study.records import TrialRecord
from trials.contract.outcomes import Outcome


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
