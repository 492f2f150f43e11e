"""The launch budget and the study-wide questions the sweep asks before each proposal.

``sweep.n_trials`` counts real launches across resumes and workers. A launch is
claimed through the storage right after ``ask`` and given back when the point
is ruled out or its result reused, so several workers on one study spend
exactly the budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.settings import SweepSettings
from autotune.study.records import LAUNCHED, counts_as_launch, evaluated, outcome_of

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def count_launches(study: optuna.Study) -> int:
    """Real launches so far (all workers); lost ones (orphaned, interrupted) are retried."""
    return sum(1 for t in study.get_trials(deepcopy=False) if counts_as_launch(t))


def claim_launch(study: optuna.Study, trial: optuna.Trial, n_trials: int) -> bool:
    """Claim one launch of the budget for ``trial``; False (claim withdrawn) when spent.

    Lower trial numbers win: a worker whose claim would pass n_trials, counting only
    the claims of earlier trials, backs off.
    """
    trial.set_user_attr(LAUNCHED, True)
    earlier = sum(1 for t in study.get_trials(deepcopy=False)
                  if t.number < trial.number and counts_as_launch(t))
    if earlier < n_trials:
        return True
    trial.set_user_attr(LAUNCHED, False)
    return False


def failed_launches(study: optuna.Study) -> int:
    """Launches that taught nothing (crash, hang, timeout)."""
    return sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
               if counts_as_launch(t) and (o := outcome_of(t)) is not None and o.is_failure)


def failure_rate_verdict(study: optuna.Study, launched: int, settings: SweepSettings,
                         study_dir: Path) -> str | None:
    """Why the sweep must stop: more than ``sweep.max_failure_rate`` of launches failed."""
    if launched < settings.min_trials_for_failure_rate:
        return None
    failed = failed_launches(study)
    if failed / launched <= settings.max_failure_rate:
        return None
    return (f"stopped: {failed} of {launched} launched trials failed (crash/hang/timeout), "
            f"above sweep.max_failure_rate={settings.max_failure_rate:g}; see the log tails "
            f"in {study_dir}/trial-*/stderr.log")


def evaluated_result(study: optuna.Study, params: dict) -> FrozenTrial | None:
    """A finished trial with exactly these params whose result stands (to reuse)."""
    finished = study.get_trials(deepcopy=False, states=FINISHED)
    return next((t for t in finished if t.params == params and evaluated(t)), None)


def n_evaluated_points(study: optuna.Study) -> int:
    """Distinct configurations already evaluated or ruled out."""
    seen = {json.dumps(t.params, sort_keys=True, default=str)
            for t in study.get_trials(deepcopy=False) if evaluated(t)}
    return len(seen)
