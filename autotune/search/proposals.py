"""Where proposals come from: the baseline first, then the cost model's best predictions
where it times the workload, else the baseline's one-knob neighbours, then the sampler."""

from __future__ import annotations

import json

import optuna
from optuna.trial import TrialState

from autotune.search.space import SearchSpace
from autotune.search.unrepeated import NoRepeats
from autotune.settings import Sampler, SweepSettings
from autotune.study.data_bound import DATA_KNOBS, data_bound_evidence
from autotune.study.records import ROLE, load_records, outcome_of
from autotune.study.schema.keys import (
    FIXED_PARAMS,
    NEIGHBOUR_ROLE,
    PREDICTED_ROLE,
    PREDICTED_SEEDED,
    PROBE_ROLE,
)
from autotune.study.selection import BASELINE_ROLE, baseline
from trials.contract.outcomes import Outcome

#: Study user attr: the cost model's best predictions were queued (once per study).
SEEDED = PREDICTED_SEEDED


def seed_baseline(study: optuna.Study, space: SearchSpace) -> None:
    """Trial 0 of a new study is the baseline (the user's composed configuration)."""
    if not study.get_trials(deepcopy=False):
        study.enqueue_trial(space.baseline, user_attrs={ROLE: BASELINE_ROLE})


def waiting(trials: list) -> bool:
    """Whether a queued point waits. The sources of new points (the neighbours, the
    model's seeds) queue one only when none does, so a retry of a lost trial goes first
    and no seed or neighbour is left queued when the budget ends."""
    return any(t.state is TrialState.WAITING for t in trials)


def queue_next_neighbour(study: optuna.Study, space: SearchSpace) -> None:
    """Queue the next one-knob change of the baseline (``sweep.neighbours``).

    Queued one at a time, only when nothing else waits, so that retries of lost
    trials go first and a resume picks up where it stopped; the baseline's input pipeline
    decides where its data knobs go (:func:`data_knobs_at`).
    """
    trials = study.get_trials(deepcopy=False)
    if waiting(trials):
        return
    seen = [t.params for t in trials] + [t.system_attrs.get(FIXED_PARAMS) for t in trials]
    first, last = data_knobs_at(study)
    for point in space.neighbours(first=first, last=last):
        if point not in seen:
            study.enqueue_trial(point, user_attrs={ROLE: NEIGHBOUR_ROLE})
            return


def model_times(space: SearchSpace, model) -> bool:
    """Whether the cost model has terms for the workload (it predicts the baseline). Where
    it has none (a CNN, a ``workload.entry``), nothing predicts a knob's effect, and the
    one-knob neighbours of the baseline are what measures each knob once
    (``sweep.neighbours=null``). A host whose GEMM peak is not known yet has a model with
    terms and no seconds: its trials measure the peak, and the model seeds once it has it."""
    return model is not None and _prediction(space, model, space.baseline) is not None


def _prediction(space: SearchSpace, model, point: dict):
    """The model's prediction for a point of the space; None where the point does not
    build or the model has no terms for it."""
    from autotune.search.feasibility import structural_problem

    cfg, problem = structural_problem(space, point)
    return None if problem else model.predict_config(cfg)


def data_knobs_at(study: optuna.Study) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The knobs whose one-knob changes go first, and those that go last. The method fixes
    the input pipeline first when it holds the step back, and only then: the data knobs go
    first once the measured baseline is data-bound (by its data wait or its pipeline
    probe), last once it measured its data wait and is not (a pipeline that keeps up has
    no time to give back), and in the space's order while nothing is known."""
    base = baseline(load_records(study))
    if base is None or not base.ok:
        return (), ()
    if data_bound_evidence(base):
        return DATA_KNOBS, ()
    return ((), DATA_KNOBS) if base.data_wait_share is not None else ((), ())


def sampler(study: optuna.Study, settings: SweepSettings,
            space: SearchSpace) -> optuna.samplers.BaseSampler:
    """``sweep.sampler``, seeded so that a resume does not re-propose the same first points
    (the grid keeps its seed: it skips the points the study has already run). TPE and
    random draw again rather than propose a configuration the study already has
    (:class:`~autotune.search.unrepeated.NoRepeats`)."""
    seed = settings.seed + len(study.get_trials(deepcopy=False))
    if settings.sampler is Sampler.grid:
        grid = {path: list(d.choices) for path, d in space.distributions().items()}
        return _Grid(grid, seed=settings.seed)
    if settings.sampler is Sampler.random:
        inner: optuna.samplers.BaseSampler = optuna.samplers.RandomSampler(seed=seed)
    else:
        # Trials in flight side by side: TPE assumes a poor value for running ones
        # (constant liar), so it does not propose the same point K times.
        inner = optuna.samplers.TPESampler(seed=seed, n_startup_trials=settings.n_startup_trials,
                                           constant_liar=settings.parallel_trials > 1)
    return NoRepeats(inner, space.distributions(), seed=seed)


class _Grid(optuna.samplers.GridSampler):
    """Optuna's grid without its ``study.stop()`` once every point ran: that call is only
    valid inside ``study.optimize``, and the sweep ends by itself on an exhausted space."""

    def after_trial(self, study, trial, state, values) -> None:
        return None


#: Knobs the cost model reads; points that differ only elsewhere predict the same.
MODELLED_PREFIXES = ("workload.", "parallel.", "train.", "precision", "hardware", "runtime.mode",
                     "runtime.threads")


def queue_best_predicted(study: optuna.Study, space: SearchSpace, model, budget_gib: float,
                         k: int, *, max_time_error: float, min_rank: float = 1.0,
                         ranking=None, follow: bool = False,
                         measured_terms=None, slow_ratio: float = 0.0) -> list[dict]:
    """Queue the k points with the best predicted tokens/s that fit the budget, once per
    study, one at a time and only when nothing else waits (a retry of a lost trial goes
    first, and no seed is left queued when the budget ends), each the best by the model as
    refitted when its turn comes, as soon as the model is trusted: its step-time error
    (``time_uncertainty``: the imported fit's held-out error, or the study's own fit's
    residual) is at most
    ``max_time_error``, or ``ranking()`` (the leave-one-out Spearman's rho on the study's
    own trials, None when too few) is at least ``min_rank``. One point per combination of
    the modelled knobs; the knobs the model cannot tell apart (data workers, memory
    levels, ...) take the values of the fastest trial measured so far, else the
    baseline's. Points the study has are skipped. A point whose prediction rests on a time
    constant no trial of the study timed (``measured_terms()``: the model's terms with
    evidence; a fit's small residual on graph-mode trials says nothing of PyNative, of fp16
    or of a second rank, whose constants are still the priors' guesses) is queued only as a
    probe (role ``probe``): the best of them, alone and first, when the model ranks it above
    every timed point, and once per untimed term unless the probe ran out of memory; its
    run times the term, and later picks rest on it. With ``follow``,
    after those k the model's best unseen point is queued every other launch while it stays
    trusted. No point is queued that the slow rule (``slow_ratio``) would stop were it as
    fast as the optimistic end of its prediction (``time_uncertainty``), relative to the
    model's prediction for the fastest trial measured: once the model's ranking has run
    past what it can still win, the sampler proposes (the model's picks of PyNative
    points, each predicted a third of the graph-mode best, were stopped as slow one after
    another)."""
    from autotune.search.feasibility import structural_problem
    from autotune.study.view import StudyView

    trials = study.get_trials(deepcopy=False)
    if waiting(trials):
        return []
    seeded = study.user_attrs.get(SEEDED)
    if seeded:
        picked = sum(1 for t in trials if t.user_attrs.get(ROLE) in (PREDICTED_ROLE, PROBE_ROLE))
        if picked >= seeded["points"] and (not follow or not _follow_due(study)):
            return []
    trusted = model.constants.time_uncertainty <= max_time_error
    if not trusted and ranking is not None:
        rho = ranking()
        trusted = rho is not None and rho >= min_rank
    if not trusted:
        return []
    view = StudyView(study)
    fastest = view.best(budget_gib)
    unmodelled = {p: v for p, v in (fastest.params if fastest else space.baseline).items()
                  if not p.startswith(MODELLED_PREFIXES) and p in space.baseline}
    seen = [t.params for t in view.trials] + [t.system_attrs.get(FIXED_PARAMS)
                                               for t in view.trials]
    candidates = {}
    for point in space.points():
        modelled = {p: v for p, v in point.items() if p.startswith(MODELLED_PREFIXES)}
        key = json.dumps(modelled, sort_keys=True, default=str)
        if key not in candidates:
            candidates[key] = {**point, **unmodelled}
    evidence = measured_terms() if measured_terms is not None else None
    scored, untimed = [], []
    for point in candidates.values():
        cfg, problem = structural_problem(space, point)
        if problem or point in seen:
            continue
        prediction = model.predict_config(cfg)
        # The memory guard's own rule: out only when even the optimistic end is over.
        if prediction is None or prediction.tokens_per_s is None or \
                prediction.over_budget(budget_gib):
            continue
        new_terms = set() if evidence is None else model.time_terms(cfg) - evidence
        (untimed if new_terms else scored).append((prediction.tokens_per_s, point, new_terms))
    floor = _slow_line(space, model, fastest, slow_ratio)
    scored, untimed = ([c for c in group if c[0] >= floor] for group in (scored, untimed))
    # One point a call: the next is chosen by the model as refitted after this one ran.
    picks = [(point, PREDICTED_ROLE) for _, point, _ in sorted(scored, key=lambda s: -s[0])[:1]]
    if untimed:
        probed = _probed_terms(study, space, model)
        untimed = [u for u in untimed if u[2] - probed]
    if untimed:
        # A point resting on a term no trial timed goes first, alone, as the probe that
        # times it, when the model ranks it above every timed point: its rank rests on a
        # prior's guess, which one run checks and more runs only repeat. Once per term: a
        # probe stopped as slow before its first timed step answered too; one that ran out
        # of memory did not, and the next best point of its term is probed instead.
        fastest, probe, _ = max(untimed, key=lambda s: s[0])
        if not scored or fastest > max(s[0] for s in scored):
            picks = [(probe, PROBE_ROLE)]
    for point, role in picks:
        study.enqueue_trial(point, user_attrs={ROLE: role})
    if not seeded and picks:
        study.set_user_attr(SEEDED, {"points": min(k, len(scored) + len(untimed)),
                                     "constants": model.constants.source})
    return [point for point, _ in picks]


def _slow_line(space: SearchSpace, model, fastest, slow_ratio: float) -> float:
    """The predicted tokens/s below which a point, even at the optimistic end of its
    prediction, is one the slow rule would stop against the fastest trial measured (0: no
    trial measured, no slow rule, or no prediction for it). Both sides are the model's:
    its ranking, not its seconds, is what the line rests on."""
    if fastest is None or slow_ratio <= 0:
        return 0.0
    # A trial of a study whose space changed since (sweep.allow_changed_space) ran a knob
    # the space now has at its composed value, the baseline's, and may carry one it lost.
    point = {**space.baseline, **{k: v for k, v in fastest.params.items() if k in space.baseline}}
    prediction = _prediction(space, model, point)
    if prediction is None or prediction.tokens_per_s is None:
        return 0.0
    return slow_ratio * prediction.tokens_per_s / (1 + model.constants.time_uncertainty)


def _probed_terms(study: optuna.Study, space: SearchSpace, model) -> set[str]:
    """The time terms some trial answered or may still: a probe queued, running or
    completed, and any trial stopped as slow, whoever proposed it (slow in its warm-up is an
    answer before any timed step: PyNative was probed again after three of the sampler's
    PyNative trials had been stopped as slow). A trial that ran out of memory, or never
    ran, said nothing of time."""
    from autotune.search.feasibility import structural_problem

    probes = [t.params or t.system_attrs.get(FIXED_PARAMS)
              for t in study.get_trials(deepcopy=False)
              if outcome_of(t) is Outcome.SLOW
              or (t.user_attrs.get(ROLE) == PROBE_ROLE and outcome_of(t) in (None, Outcome.OK))]
    configs = [structural_problem(space, p)[0] for p in probes if p]  # None: no longer builds
    return set().union(*(model.time_terms(cfg) for cfg in configs if cfg is not None))


def _follow_due(study: optuna.Study) -> bool:
    """After the first seeds, the model's next best unseen point every other launch: when
    nothing waits and the newest trial was the sampler's (the sampler keeps exploring
    what the model cannot see)."""
    trials = study.get_trials(deepcopy=False)
    if not trials or waiting(trials):
        return False
    return trials[-1].user_attrs.get(ROLE) not in (PREDICTED_ROLE, PROBE_ROLE)
