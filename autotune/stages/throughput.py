"""Stage 4, throughput: the sweep, which skips what stage 1 ruled out and goes on from the
data stage's trials (``python -m autotune sweep`` is this stage alone). Run again, it is
the sweep run again: with its budget spent nothing more is launched, a final race a stop
cut short is finished, and the leaderboard and the pick are printed."""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.study.schema.stages import StageResult
from autotune.study.sweep_end import SweepOutcome


def run_throughput(sweep: Callable[[], SweepOutcome],
                   pick: Callable[[optuna.Study], str] | None = None) -> StageResult:
    """The stage's result; ``sweep()`` runs the whole sweep (its leaderboard and winner);
    ``pick(study)`` names its pick in the stage's lines (tune's verdicts)."""
    outcome = sweep()
    lines = [outcome.message.splitlines()[0]]
    if pick is not None and outcome.study is not None and outcome.exit_code == 0:
        lines.append(pick(outcome.study))
    return StageResult(done=outcome.exit_code == 0, failed=outcome.exit_code != 0,
                       lines=lines)
