"""Stage 4, throughput: the sweep, which skips what stage 1 ruled out and goes on from the
data stage's trials (``python -m autotune sweep`` is this stage alone)."""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.study import budget
from autotune.study.schema.stages import StageResult
from autotune.study.sweep_end import SweepOutcome
from autotune.sweep_context import SweepContext


def run_throughput(context: SweepContext, study: optuna.Study,
                   sweep: Callable[[], SweepOutcome]) -> StageResult:
    """The stage's result; ``sweep()`` runs the whole sweep (its leaderboard and winner)."""
    launched = budget.count_launches(study)
    if launched >= context.settings.n_trials:
        return StageResult(done=True, lines=[f"the sweep's budget is spent: {launched} launched"])
    outcome = sweep()
    return StageResult(done=outcome.exit_code == 0, failed=outcome.exit_code != 0,
                       lines=[outcome.message.splitlines()[0]])
