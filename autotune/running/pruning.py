"""Pruning: stop a running trial that is clearly not worth finishing.

``sweep.pruner`` chooses the rule. Each is an Optuna pruner
(:class:`optuna.pruners.BasePruner`) installed as the study's pruner, so that it is
Optuna's own ``trial.report`` / ``trial.should_prune()`` that asks it:

* ``slow`` (default, :class:`SlowPruner`): stop a trial clearly slower than the best one
  so far. Two bars, because warm-up steps can be much slower than steady state (a
  data-parallel trial measured 2x slower in warm-up than in its measured steps, where it
  was the fastest): during warm-up only a trial far behind (``slow_warmup_ratio``) is
  stopped; once measured steps exist they are judged against ``slow_ratio``.
* ``median``: Optuna's ``MedianPruner`` over the reported tokens/s, past the compile step
  and ``run.warmup_steps``, once 5 trials completed.
* ``none``: never.

The sweep calls one thing after each new step of a running trial,
:meth:`StepPruner.verdict`: it reports the trial's tokens/s so far, asks Optuna, and says
why the trial should stop, or None. Pareto studies prune nothing (Optuna cannot report
to a multi-objective trial, and a slow trial may be the memory-light end of the front).
"""

from __future__ import annotations

import abc
import dataclasses
import math
import statistics

import optuna
from optuna.trial import FrozenTrial

from autotune.settings import Pruner, StopRules, SweepSettings
from trials.contract.events import Phase, StepRecord
from trials.contract.performance import Performance
from trials.contract.scorecard import throughput
from trials.contract.stats import CONFIDENCE
from trials.contract.units import rate

#: The two-sided 95 % normal quantile (the confidence every interval here claims).
Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)


def judged(steps: list[StepRecord], warmup_floor: int = 0) -> tuple[Performance, int, bool]:
    """(what the running trial's steps so far measure, steps it rests on, judged as
    measured?).

    Measured steps first; else the warm-up steps past the trial's warm-up floor
    (``run.warmup_steps``), which count as measured once there are ``slow_min_steps`` of
    them: a trial whose warm-up runs on because its step time is not steady is judged
    like one that measures; else every warm-up step, against the lenient warm-up bar.
    """
    measured = throughput(steps)
    if measured.tokens_per_s is not None:
        return measured, measured.measured_steps, True
    warm = [dataclasses.replace(s, phase=Phase.MEASURE) for s in steps
            if s.phase is Phase.WARMUP]
    past_floor = warm[warmup_floor:] if warmup_floor > 0 else []
    if past_floor:
        return throughput(past_floor), len(past_floor), True
    if not warm:
        return Performance(), 0, False
    return throughput(warm), len(warm), False


def estimate(steps: list[StepRecord], warmup_floor: int = 0) -> tuple[float | None, int, bool]:
    """(tokens/s, steps it rests on, judged as measured?) of a running trial (:func:`judged`)."""
    perf, n, is_measured = judged(steps, warmup_floor)
    return perf.tokens_per_s, n, is_measured


def slow_verdict(steps: list[StepRecord], best: float | None, rules: StopRules,
                 warmup_floor: int = 0, unit: str | None = None, *,
                 noise: float = 0.0, step_cv: float = 0.0) -> str | None:
    """Why the trial should stop as slow, or None.

    It is slow only when the whole 95 % interval of its tokens/s so far is below the bar:
    the bootstrap of its step time, at least as wide as ``n`` steps that spread by
    ``step_cv`` give (the study's runs' spread, :func:`autotune.study.noise.step_spread`:
    a few steps cannot show their own), widened by ``noise``, the log-spread that
    run-to-run noise gives the ratio of its one run to the best's runs
    (:func:`run_to_run_spread`).
    A few steps that scatter, as on a busy machine, give an interval too wide to claim it;
    and a best that is the luckiest of many noisy runs is not a bar a trial's one run must
    clear (on the recorded image_cnn landscape, at 13.5 % run-to-run noise, a quarter of
    the slow verdicts without it fell on points truly above half the optimum)."""
    perf, n, is_measured = judged(steps, warmup_floor)
    tps = perf.tokens_per_s
    # Not on one step, even 10x behind: a 20 ms step of a tiny model hiccups to 200 ms
    # on a busy machine (a test's trial was stopped so).
    if tps is None or not best or n < rules.slow_min_steps:
        return None
    ratio = rules.slow_ratio if is_measured else rules.slow_warmup_ratio
    high = perf.tokens_per_s_high
    upper = max(high if high is not None and math.isfinite(high) else tps,
                tps * math.exp(Z * step_cv / math.sqrt(n))) * math.exp(Z * noise)
    if upper >= ratio * best:
        return None
    where = ("measured" if steps[-1].phase is Phase.MEASURE else
             "steady-enough warm-up" if is_measured else "warm-up")
    return (f"{tps:,.0f} {rate(unit, short=True)} after {n} {where} steps < {ratio:g} x best "
            f"{best:,.0f}"
            + (f" (95 % CI up to {upper:,.0f}"
               + (f", run-to-run noise {100 * noise:.1f} % in it" if noise else "")
               + (f", steps spread {100 * step_cv:.0f} % as the study's runs" if step_cv
                  else "") + ")"
               if upper != tps else ""))


def run_to_run_spread(cv: float, best_runs: int) -> float:
    """The log-spread run-to-run noise of ``cv`` gives the ratio of one run to the mean of
    ``best_runs`` runs (as :func:`autotune.study.noise.compare` widens a gain)."""
    return cv * math.sqrt(1 + 1 / max(best_runs, 1))


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What the sweep knows of a running trial beyond its intermediate values."""

    steps: list[StepRecord]
    #: The best tokens/s of the study when the trial was launched (None: no best yet).
    best: float | None
    #: The trial's ``run.warmup_steps``.
    warmup_floor: int
    #: What the throughput counts (the workload's unit: tokens, samples).
    unit: str | None = None
    #: The run-to-run spread of the trial's ratio to the best (:func:`run_to_run_spread`).
    noise: float = 0.0
    #: The within-run CV of step times the study's runs show (:func:`slow_verdict`).
    step_cv: float = 0.0


class StepPruner(optuna.pruners.BasePruner):
    """An Optuna pruner that is also shown the running trial's typed steps, and says why.

    Install it as the study's pruner (``study.pruner = pruner``); then call
    :meth:`verdict` after each new step. ``prune(study, trial)`` judges a trial while
    :meth:`verdict` asks about it (the steps are shown to it for that call only).
    """

    def __init__(self) -> None:
        # Keyed by trial number: concurrent trials (threads) share one pruner.
        self._evidence: dict[int, Evidence] = {}
        self._reasons: dict[int, str] = {}

    @abc.abstractmethod
    def reason(self, study: optuna.Study, trial: FrozenTrial) -> str | None:
        """Why the trial should stop, or None (the message the trial's record keeps)."""

    def evidence(self, trial: FrozenTrial) -> Evidence | None:
        return self._evidence.get(trial.number)

    def might_prune(self, evidence: Evidence) -> bool:
        """Whether asking Optuna can come to a prune. ``should_prune`` reads the trial back
        from the storage (a query per step): a pruner that can tell from the steps alone
        that it will not prune skips it."""
        return True

    def verdict_against(self, steps: list[StepRecord], best: float,
                        warmup_floor: int, *, noise: float = 0.0,
                        step_cv: float = 0.0) -> str | None:
        """Why this rule would stop a trial with ``steps`` judged against ``best``, without
        asking Optuna (the sweep re-judges a trial stopped under load by it); None when it
        would not, or when the rule needs the study to tell."""
        return None

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        why = self.reason(study, trial)
        if why is not None:
            self._reasons[trial.number] = why
        return why is not None

    def verdict(self, trial: optuna.Trial, steps: list[StepRecord], best: float | None,
                warmup_floor: int, unit: str | None = None, *,
                noise: float = 0.0, step_cv: float = 0.0) -> str | None:
        """Report the trial's tokens/s so far to Optuna and ask the study's pruner; why the
        trial should stop, or None."""
        if len(trial.study.directions) > 1:
            return None  # Optuna cannot report to a multi-objective trial
        if trial.study.pruner is not self:
            raise RuntimeError("the pruner is not the study's: set study.pruner to it first")
        tps, _, _ = estimate(steps, warmup_floor)
        if tps is None:
            return None
        trial.report(tps, steps[-1].step)
        evidence = Evidence(steps, best, warmup_floor, unit, noise, step_cv)
        if not self.might_prune(evidence):
            return None
        self._evidence[trial.number] = evidence
        try:
            return self._reasons.get(trial.number) if trial.should_prune() else None
        finally:
            self._evidence.pop(trial.number, None)
            self._reasons.pop(trial.number, None)


class SlowPruner(StepPruner):
    """``sweep.pruner=slow``: the slow rule (:func:`slow_verdict`) under ``sweep.stop``."""

    def __init__(self, rules: StopRules) -> None:
        super().__init__()
        self.rules = rules

    def reason(self, study: optuna.Study, trial: FrozenTrial) -> str | None:
        seen = self.evidence(trial)
        if seen is None:
            return None  # only the steps say how far behind a trial is
        return slow_verdict(seen.steps, seen.best, self.rules, seen.warmup_floor, seen.unit,
                            noise=seen.noise, step_cv=seen.step_cv)

    def might_prune(self, evidence: Evidence) -> bool:
        return slow_verdict(evidence.steps, evidence.best, self.rules,
                            evidence.warmup_floor, noise=evidence.noise,
                            step_cv=evidence.step_cv) is not None

    def verdict_against(self, steps: list[StepRecord], best: float,
                        warmup_floor: int, *, noise: float = 0.0,
                        step_cv: float = 0.0) -> str | None:
        return slow_verdict(steps, best, self.rules, warmup_floor, noise=noise,
                            step_cv=step_cv)


class OptunaPruner(StepPruner):
    """One of Optuna's own pruners over the reported tokens/s (``median``, ``none``)."""

    def __init__(self, pruner: optuna.pruners.BasePruner) -> None:
        super().__init__()
        self.pruner = pruner

    def reason(self, study: optuna.Study, trial: FrozenTrial) -> str | None:
        if not self.pruner.prune(study, trial):
            return None
        step = trial.last_step
        seen = self.evidence(trial)
        unit = rate(seen.unit if seen else None, short=True)
        return (f"{trial.intermediate_values[step]:,.0f} {unit} at step {step}: pruned by "
                f"Optuna's {type(self.pruner).__name__}")

    def might_prune(self, evidence: Evidence) -> bool:
        return not isinstance(self.pruner, optuna.pruners.NopPruner)


def build(settings: SweepSettings, *, warmup_steps: int) -> StepPruner:
    """The pruner ``sweep.pruner`` names; ``warmup_steps`` is the trials' ``run.warmup_steps``."""
    if settings.pruner is Pruner.none:
        return OptunaPruner(optuna.pruners.NopPruner())
    if settings.pruner is Pruner.median:
        # Step 0 is the compile step, then the warm-up floor: neither says how fast a
        # trial runs (too low a n_warmup_steps makes every trial look slow).
        return OptunaPruner(optuna.pruners.MedianPruner(n_warmup_steps=warmup_steps + 1))
    return SlowPruner(settings.stop)
