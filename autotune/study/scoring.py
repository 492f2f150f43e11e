"""Turn a trial's end into what Optuna stores: state, objective values, constraints, attrs.

This is where the sampler learns from failures. Each :class:`Outcome` carries its
Optuna state and the constraint it sets (value > 0 = infeasible):

- ok: COMPLETE, ``memory_over_budget_gib`` = peak - budget;
- oom: PRUNED, memory over budget > 0 (TPE stops proposing its neighbours);
- infeasible, unsupported, config_error: PRUNED, ``infeasible`` = 1;
- diverged: PRUNED, ``diverged`` = 1;
- slow: PRUNED, memory from its peak, intermediate tokens/s kept;
- crash, hang, timeout, orphaned, interrupted, budget: FAIL (samplers ignore FAIL).
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from autotune.study import notes
from autotune.study import records as R
from autotune.study.artifacts import RunFiles, attach_run
from autotune.study.conditions import missed_precision
from autotune.study.result import TrialResult
from autotune.study.schema.scorecard import Resources
from trials.contract.jsonsafe import to_json
from trials.contract.outcomes import Constraint, Outcome
from trials.contract.scorecard import scorecard


def state_for(outcome: Outcome) -> TrialState:
    return TrialState[outcome.state]


def constraints_for(outcome: Outcome, peak_gib: float | None,
                    budget_gib: float) -> dict[str, float]:
    over = (peak_gib - budget_gib) if peak_gib is not None else -budget_gib
    kind = outcome.meaning.constraint
    if kind is Constraint.MEMORY:
        over = max(over, 0.0) + 1.0  # strictly infeasible even if the peak was not measured
    return {
        Constraint.MEMORY.value: over,
        Constraint.INFEASIBLE.value: 1.0 if kind is Constraint.INFEASIBLE else 0.0,
        Constraint.DIVERGED.value: 1.0 if kind is Constraint.DIVERGED else 0.0,
    }


def peak_of(result: TrialResult) -> float | None:
    if result.summary is not None:
        peak = Resources.from_json(result.summary.resources).peak_rss_gib_max_rank
        if peak is not None:
            return peak
    peaks = [s.peak_rss_gib for s in result.steps if s.peak_rss_gib]
    return max(peaks) if peaks else None


def tell(study: optuna.Study, trial: optuna.Trial, result: TrialResult, *, budget_gib: float,
         multi_objective: bool, pooled_tokens_per_s: float | None = None,
         contention_cores: float | None = None,
         target_interval: float | None = None, files: RunFiles | None = None) -> TrialState:
    """Record the result on the trial and tell Optuna. Failures are data, never raised.

    ``pooled_tokens_per_s``: the estimate over this run and its repeats (racing), told
    instead of this run's own. The run's conditions are stored judged against
    ``contention_cores``; ``target_interval`` (given for the baseline) flags a run whose
    interval missed it. ``files`` are uploaded as the trial's artifacts (before it is
    finished: Optuna refuses them after), and why it ended becomes its dashboard note."""
    peak = peak_of(result)
    attrs = {R.REASON: result.reason.value, R.DETAIL: result.detail[:500],
             R.WALL_S: result.wall_s}
    if result.conditions is not None:
        conditions = (result.conditions if contention_cores is None
                      else result.conditions.judge(contention_cores))
        attrs[R.CONDITIONS] = conditions.to_dict()
    if target_interval is not None and result.summary is not None:
        missed = missed_precision(result.summary.perf, target_interval)
        if missed:
            attrs[R.IMPRECISE] = missed
    if result.summary is not None:
        attrs[R.SCORECARD] = result.summary.layers()
    elif result.steps:  # a stopped trial: keep what was measured, computed the same way
        attrs[R.SCORECARD] = scorecard(result.steps, flops_per_token=None, peak_flops=None,
                                       recompute=False, peak_rss_gib=[peak] if peak else [],
                                       budget_gib=budget_gib, spike_factor=float("inf"))
    if result.log_tail:
        attrs[R.LOG_TAIL] = result.log_tail
    for key, value in attrs.items():  # non-finite numbers as the metrics file writes them
        trial.set_user_attr(key, to_json(value))
    if files is not None:
        attach_run(trial, files)
    state = state_for(result.reason)
    if state is not TrialState.FAIL:
        for key, value in constraints_for(result.reason, peak, budget_gib).items():
            trial.set_constraint(key, value)
    if state is TrialState.COMPLETE:
        tps = float(pooled_tokens_per_s or result.summary.perf.tokens_per_s)
        values = [tps, float(peak or 0.0)] if multi_objective else tps
        study.tell(trial, values)
    else:
        study.tell(trial, state=state)
    notes.save(trial, notes.outcome_note(result.reason, result.detail,
                                         scorecard=attrs.get(R.SCORECARD)))
    return state


def tell_reused(study: optuna.Study, trial: optuna.Trial, original: optuna.trial.FrozenTrial,
                *, multi_objective: bool) -> None:
    """A proposal identical to a finished trial: reuse its result, mark it, launch nothing."""
    for key, value in original.user_attrs.items():
        if key not in (R.LAUNCHED, R.WORKER, R.PROCESS, R.HEARTBEAT, R.ROLE, R.TRIAL_DIR):
            trial.set_user_attr(key, value)
    root = original.user_attrs.get(R.REUSED_FROM)
    source = original.number if root is None else root
    trial.set_user_attr(R.REUSED_FROM, source)
    trial.set_user_attr(R.LAUNCHED, False)
    for key, value in original.constraints.items():
        trial.set_constraint(key, value)
    if original.state is TrialState.COMPLETE:
        study.tell(trial, original.values if multi_objective else original.value)
    else:
        study.tell(trial, state=original.state)
    outcome = R.outcome_of(original)
    if outcome is not None:
        detail = f"Reused trial {source}'s result (the same parameters); nothing was launched."
        notes.save(trial, notes.outcome_note(outcome, detail, launched=False,
                                             scorecard=original.user_attrs.get(R.SCORECARD)))


def tell_rejected(study: optuna.Study, trial: optuna.Trial, detail: str, *, budget_gib: float,
                  outcome: Outcome = Outcome.INFEASIBLE) -> None:
    """Not launched: ruled out (structural rule, dominated by an OOM) at zero cost, or,
    as ``budget``, left to another worker (FAIL: the sampler ignores it)."""
    trial.set_user_attr(R.REASON, outcome.value)
    trial.set_user_attr(R.DETAIL, detail[:500])
    trial.set_user_attr(R.LAUNCHED, False)
    state = state_for(outcome)
    if state is not TrialState.FAIL:
        for key, value in constraints_for(outcome, None, budget_gib).items():
            trial.set_constraint(key, value)
    study.tell(trial, state=state)
    notes.save(trial, notes.outcome_note(outcome, detail, launched=False))
