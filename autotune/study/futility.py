"""Sweeps that cannot find anything: a baseline whose loss is never finite, and a sweep
in which no trial completed. Either ends the sweep with exit code 1 and one line saying
why, instead of spending the budget and exiting 0.

A trial "diverged at step 1" when it diverged with at most one finite loss: its loss
was non-finite from the first step (the forward itself), or from the first update on
(a learning rate that blows the weights up at once). When the baseline does that, the
knobs are not the cause (accumulation, execution mode, threads, workers, parallel split
and recompute train the same numbers), the workload is, so the sweep stops right there,
unless the space varies the precision (float16 can overflow where float32 does not):
then the other trials are worth their launch.
"""

from __future__ import annotations

from collections import Counter

from autotune.study.records import TrialRecord
from autotune.study.sweep_end import SweepEnd
from trials.contract.outcomes import Outcome

PRECISION = "precision"


def diverged_at_step_1(record: TrialRecord) -> bool:
    """Diverged with at most one finite loss (the scorecard of its steps says so)."""
    correctness = record.scorecard.get("correctness") or {}
    finite = correctness.get("finite_loss_steps")
    return (record.reason is Outcome.DIVERGED and finite is not None and finite <= 1
            and (correctness.get("nonfinite_steps") or 0) > 0)


WORKLOAD_DIVERGES = "stopped: every trial diverged at step 1: the workload, not a knob"


def baseline_diverged(record: TrialRecord, knobs: dict[str, list]) -> SweepEnd | None:
    """Why the sweep ends after its baseline diverged at step 1 (``knobs``: the space's
    values per knob); None when it did not, or a precision of the space may not."""
    if not diverged_at_step_1(record) or len(knobs.get(PRECISION, [])) > 1:
        return None
    return SweepEnd.stopped(
        f"{WORKLOAD_DIVERGES}: the baseline (trial {record.number}) had no finite loss after "
        f"its first step ({record.detail}); check the workload's model, data and train.lr, "
        "then run the same command again")


def nothing_completed(records: list[TrialRecord]) -> SweepEnd | None:
    """Why a sweep whose trials all ended without a result failed; None when one completed,
    nothing was tried at all, or a trial still runs (another worker's)."""
    ended = [r for r in records if r.reason is not None and r.reused_from is None
             and r.reason.evaluated]
    if not ended or any(r.ok for r in ended) or any(r.state == "RUNNING" for r in records):
        return None
    launched = [r for r in ended if r.launched]
    if launched and all(diverged_at_step_1(r) for r in launched):
        return SweepEnd.stopped(
            f"{WORKLOAD_DIVERGES}: all {len(launched)} launched trial(s) had no finite loss "
            "after their first step; check the workload's model, data and train.lr")
    counts = Counter(r.reason.value for r in ended)
    summary = ", ".join(f"{n} {reason}" for reason, n in counts.most_common())
    return SweepEnd.stopped(f"stopped: no trial completed: {summary}; see the leaderboard's "
                            "reasons and the log tails in the trials' stderr.log")
