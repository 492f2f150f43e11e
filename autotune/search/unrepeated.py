"""A sampler that does not propose a configuration the study already has.

TPE in a small categorical space proposes its best point again and again (each copy,
told back to it as the reused result, makes that point look better still): a sweep
saw one point five times. A repeat launches nothing (the sweep's Reuse filter settles
it), but it is a wasted proposal and an Optuna trial row. :class:`NoRepeats` wraps the
sampler and draws again while the point repeats one the study already measured, ruled
out or is running: up to ``n_draws`` times from the wrapped sampler (so TPE still
chooses). When every draw repeats, the sampler has converged on points the study has:
the proposal is then the unseen point nearest its last draw (fewest knobs changed, ties
drawn at random), a local search where the sampler wants to be. A uniform draw there
spent the budget on corners the study had already learned to avoid: in replays of the
recorded data-bound landscape, most launches after the first ten ran out of memory or
were stopped as slow. Only when no point within :data:`MAX_NEAREST` candidates is unseen
is a uniform draw tried, and only when every draw repeats (the space nearly exhausted) is
the repeat proposed, and reused as before.

Points queued with ``enqueue_trial`` (the baseline, its neighbours, retries) are
fixed params: Optuna never asks the sampler for them.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.study.records import evaluated
from autotune.study.schema.keys import NEAREST_ROLE, ROLE

#: Draws from each of the wrapped sampler and the uniform one before a repeat is proposed.
N_DRAWS = 16
#: Candidates the nearest-unseen search looks at before it gives up (a space of ten
#: three-way knobs has 4,520 points within four changes of any point).
MAX_NEAREST = 20_000


def point_key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def taken(study: optuna.Study, besides: int) -> set[str]:
    """Configurations a new proposal must not repeat: finished with a result that stands
    for them (measured or ruled out), or running (another worker measures it)."""
    return {point_key(t.params) for t in study.get_trials(deepcopy=False)
            if t.number != besides and (evaluated(t) or t.state is TrialState.RUNNING)}


class NoRepeats(BaseSampler):
    """``inner``'s proposals over ``space``, drawn again while they repeat a taken point."""

    def __init__(self, inner: BaseSampler, space: dict[str, BaseDistribution], *,
                 seed: int | None = None, n_draws: int = N_DRAWS) -> None:
        if n_draws < 1:
            raise ValueError(f"n_draws must be >= 1, got {n_draws}")
        self.inner, self.space, self.n_draws = inner, dict(space), n_draws
        self._uniform = RandomSampler(seed=None if seed is None else seed + 1)
        self._rng = random.Random(seed)

    def infer_relative_search_space(self, study: optuna.Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        # The whole point is drawn at once (relative), so it can be checked as one.
        return dict(self.space)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        seen = taken(study, trial.number)
        point: dict[str, Any] = {}
        for _ in range(self.n_draws):
            point = self._draw(self.inner, study, trial, search_space)
            if point_key(point) not in seen:
                return point
        near = nearest_unseen(point, search_space, seen, self._rng)
        if near is not None:
            # Its progress line says why (study.ask hands samplers the trial's own record).
            study._storage.set_trial_user_attr(trial._trial_id, ROLE, NEAREST_ROLE)
            trial.user_attrs[ROLE] = NEAREST_ROLE
            return near
        for _ in range(self.n_draws):
            point = self._draw(self._uniform, study, trial, search_space)
            if point_key(point) not in seen:
                return point
        return point  # every draw repeats: the sweep reuses the earlier result

    @staticmethod
    def _draw(sampler: BaseSampler, study: optuna.Study, trial: FrozenTrial,
              search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """One whole point from ``sampler``: its relative params, the rest independent."""
        relative = sampler.sample_relative(
            study, trial, sampler.infer_relative_search_space(study, trial))
        return {name: relative[name] if name in relative else
                sampler.sample_independent(study, trial, name, distribution)
                for name, distribution in search_space.items()}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        # A parameter outside the space (none in a sweep): the wrapped sampler's choice.
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
        self._uniform.reseed_rng()
        self._rng.seed()


def nearest_unseen(point: dict[str, Any], space: dict[str, BaseDistribution], seen: set[str],
                   rng: random.Random, limit: int = MAX_NEAREST) -> dict[str, Any] | None:
    """The point of ``space`` not in ``seen`` that changes the fewest knobs of ``point``
    (one drawn by ``rng`` among as near ones); None when none lies within the first
    ``limit`` candidates. Only categorical knobs are changed; any other keeps its value."""
    others = {name: [c for c in d.choices if c != point[name]] for name, d in space.items()
              if isinstance(d, CategoricalDistribution) and name in point}
    names = [name for name, choices in others.items() if choices]
    looked = 0
    for changes in range(1, len(names) + 1):
        unseen = []
        for changed in itertools.combinations(names, changes):
            for values in itertools.product(*(others[name] for name in changed)):
                looked += 1
                if looked > limit:
                    return None
                candidate = {**point, **dict(zip(changed, values))}
                if point_key(candidate) not in seen:
                    unseen.append(candidate)
        if unseen:
            return rng.choice(unseen)
    return None
