"""A proposal whose configuration is already running elsewhere (another worker, another
thread) waits for that twin and reuses its result instead of launching it twice."""

from __future__ import annotations

from collections.abc import Callable

import optuna
from optuna.trial import FrozenTrial

from autotune.signals import Stopped
from autotune.study import budget, reaping, scoring
from autotune.study.records import evaluated
from trials.contract.outcomes import Outcome


def await_twin(study: optuna.Study, trial: optuna.Trial, twin: int, *,
               still_here: Callable[[], None], budget_gib: float) -> FrozenTrial | None:
    """Wait for trial ``twin`` to finish (``still_here`` each poll: a heartbeat, and a raise
    when the orchestrator is told to stop); the finished twin when its result stands, to
    reuse. A lost twin (its orchestrator died, or it was interrupted) is re-queued by whoever
    reaps it: this proposal is told as ``budget`` and launches nothing (None)."""
    try:
        original = budget.wait_for(study, twin, poll_s=2.0, should_stop=still_here)
    except Stopped:
        reaping.requeue(study, trial, Outcome.INTERRUPTED,
                        "the orchestrator stopped while waiting for a twin; re-queued")
        raise
    if evaluated(original):
        return original
    scoring.tell_rejected(study, trial, f"trial {twin}, the same configuration, was lost and "
                          "re-queued; not launched twice", budget_gib=budget_gib,
                          outcome=Outcome.BUDGET)
    return None
