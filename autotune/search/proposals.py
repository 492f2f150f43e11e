"""Where proposals come from: the baseline first, then (optionally) its one-knob
neighbours, then the sampler."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from autotune.search.space import SearchSpace
from autotune.settings import SweepSettings
from autotune.study.records import ROLE
from autotune.study.selection import BASELINE_ROLE

NEIGHBOUR_ROLE = "neighbour"


def seed_baseline(study: optuna.Study, space: SearchSpace) -> None:
    """Trial 0 of a new study is the baseline (the user's composed configuration)."""
    if not study.get_trials(deepcopy=False):
        study.enqueue_trial(space.baseline, user_attrs={ROLE: BASELINE_ROLE})


def queue_next_neighbour(study: optuna.Study, space: SearchSpace) -> None:
    """Queue the next one-knob change of the baseline (``sweep.neighbours=true``).

    Queued one at a time, only when nothing else waits, so that retries of lost
    trials go first and a resume picks up where it stopped.
    """
    trials = study.get_trials(deepcopy=False)
    if any(t.state is TrialState.WAITING for t in trials):
        return
    seen = [t.params for t in trials] + [t.system_attrs.get("fixed_params") for t in trials]
    for point in space.neighbours():
        if point not in seen:
            study.enqueue_trial(point, user_attrs={ROLE: NEIGHBOUR_ROLE})
            return


def sampler(study: optuna.Study, settings: SweepSettings) -> optuna.samplers.BaseSampler:
    """TPE, seeded so that a resume does not re-propose the same first points."""
    seed = settings.seed + len(study.get_trials(deepcopy=False))
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=settings.n_startup_trials)
