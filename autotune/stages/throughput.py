"""Stage 4, throughput: the sweep, which skips what stage 1 ruled out and goes on from the
data stage's trials (``python -m autotune sweep`` is this stage alone). Run again, it is
the sweep run again: with its budget spent nothing more is launched, a final race a stop
cut short is finished, and the leaderboard and the pick are printed."""

from __future__ import annotations

from collections.abc import Callable

from autotune.study.schema.stages import StageResult
from autotune.study.sweep_end import SweepOutcome


def run_throughput(sweep: Callable[[], SweepOutcome]) -> StageResult:
    """The stage's result; ``sweep()`` runs the whole sweep (its leaderboard and winner)."""
    outcome = sweep()
    return StageResult(done=outcome.exit_code == 0, failed=outcome.exit_code != 0,
                       lines=[outcome.message.splitlines()[0]])
