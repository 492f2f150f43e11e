"""A sampler that does not propose a configuration the study already has.

TPE in a small categorical space proposes its best point again and again (each copy,
told back to it as the reused result, makes that point look better still): a sweep
saw one point five times. A repeat launches nothing (the sweep's Reuse filter settles
it), but it is a wasted proposal and an Optuna trial row. :class:`NoRepeats` wraps the
sampler and draws again while the point repeats one the study already measured, ruled
out or is running: up to ``n_draws`` times from the wrapped sampler (so TPE still
chooses), then up to ``n_draws`` times uniformly at random. Only when every draw
repeats (the space nearly exhausted) is the repeat proposed, and reused as before.

Points queued with ``enqueue_trial`` (the baseline, its neighbours, retries) are
fixed params: Optuna never asks the sampler for them.
"""

from __future__ import annotations

import json
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState

from autotune.study.records import evaluated

#: Draws from each of the wrapped sampler and the uniform one before a repeat is proposed.
N_DRAWS = 16


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
        for sampler in (self.inner, self._uniform):
            for _ in range(self.n_draws):
                point = self._draw(sampler, study, trial, search_space)
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
