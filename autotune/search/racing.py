"""Racing: configurations within noise of one another are re-measured side by side, in
interleaved rounds, until one is separably fastest.

Two moments use the one mechanism (:func:`interleaved_rounds`):

- :func:`race` (``sweep.race.rounds=R``, off by default): a new trial within noise of the
  best is raced against it before the sampler is told, and told the pooled estimate;
- :func:`final_race` (``sweep.race.finalists``, ``sweep.race.final_rounds``): when the
  budget is spent, the best and the next fastest within noise of it are raced, so that the
  pick does not rest on one lucky run. Selection needs the re-runs only at the end, where
  a race is run once, among the few that can still be the pick.

The decisions live here; the runs come through ``measure``, which the sweep gives (its
runner: locally, or as SLURM jobs in a SLURM sweep). Every run is stored as a repeat of
its trial (source ``race``), which every ranking of the study reads
(:attr:`TrialRecord.standing`).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.study import noise, selection
from autotune.study import records as R
from autotune.study.layout import StudyLayout
from autotune.study.schema import keys
from autotune.study.schema.repeats import RACE_SOURCE, Repeat, stored_repeats
from trials.contract.performance import Performance
from trials.contract.trial_dir import TrialDir

#: ``measure(source, run_dir, name)``: one more run of ``source``'s configuration in
#: ``run_dir``; its performance layer, or None when it did not finish ok.
Measure = Callable[[TrialDir, TrialDir, str], dict | None]
#: ``run(entrant, round_index)``: one more run of an entrant; its performance layer or None.
RunEntrant = Callable[[int, int], dict | None]


def interleaved_rounds(entrants: dict[int, list[noise.Run]], *, rounds: int,
                       records: list[R.TrialRecord], prior_cv: float, run: RunEntrant,
                       note: Callable[[str], None]) -> dict[int, list[dict]]:
    """Up to ``rounds`` rounds, each running every entrant still in the race once (in
    turn, so that a drifting machine moves them alike); after each round an entrant that
    another is separably faster than leaves, judged at the study's run-to-run noise
    (``records``, else ``prior_cv``) measured with the race's runs so far, and the race
    ends once one is left (each round's outcome is one ``note``). ``entrants``: each one's
    runs so far. The new runs, by entrant."""
    perfs: dict[int, list[dict]] = {e: [] for e in entrants}
    alive = list(entrants)
    for i in range(rounds):
        for entrant in alive:
            perf = run(entrant, i)
            if perf is not None:
                perfs[entrant].append(perf)
        raced = {e: entrants[e] + noise.runs_from(perfs[e]) for e in entrants}
        so_far = {e: raced[e] for e in alive}
        left = noise.separably_slower(so_far, noise.run_to_run_noise(records, prior_cv,
                                                               racing=raced))
        alive = [e for e in alive if e not in left]
        outcome = (f"trial {alive[0]} is separably fastest" if len(alive) == 1 else
                   "; ".join(f"trial {e} left, separably slower than trial {left[e]}"
                             for e in sorted(left))
                   if left else "all still within noise")
        note(f"  round {i + 1}/{rounds}: {outcome}")
        if len(alive) <= 1:
            break
    return perfs


def race(study: optuna.Study, number: int, performance: dict, leader: R.TrialRecord,
         records: list[R.TrialRecord], *, rounds: int, prior_cv: float, layout: StudyLayout,
         measure: Measure, note: Callable[[str], None]) -> float | None:
    """Race trial ``number`` (its run measured ``performance``) against ``leader`` when the
    two are within noise; the pooled tokens/s of trial ``number`` over its runs, or None
    when there was no race."""
    if not rounds or leader is None or not leader.trial_dir:
        return None
    level = noise.run_to_run_noise(records, prior_cv)
    entrants = {leader.number: noise.runs_of(leader), number: noise.runs_from([performance])}
    gain = noise.compare(entrants[number], entrants[leader.number], level)
    if gain is None or gain.real:
        return None
    note(f"racing trial {number} against the best, trial {leader.number} ({gain.text()}): "
         f"up to {rounds} interleaved round(s), until one is separably faster")
    sources = {leader.number: leader.run_dir, number: layout.trial(number)}
    perfs = interleaved_rounds(
        entrants, rounds=rounds, records=records, prior_cv=prior_cv,
        run=lambda e, i: measure(sources[e], layout.race(number, i, e),
                                 f"{study.study_name}/race/{e}"), note=note)
    R.add_repeats(study, perfs, RACE_SOURCE)
    return Performance.pool([performance, *perfs[number]])


def final_race(study: optuna.Study, records: list[R.TrialRecord], *, finalists: int,
               rounds: int, max_runs: int, budget_gib: float | None, prior_cv: float,
               layout: StudyLayout, measure: Measure, note: Callable[[str], None],
               tag: str) -> bool:
    """Race the best trial and those of the ``finalists`` fastest that are within noise of
    it, up to ``rounds`` interleaved rounds and ``max_runs`` runs in all (the sweep's
    launches: choosing never costs more runs than searching did), until one is separably
    fastest. Each run is stored as it ends, keyed by ``tag`` (the sweep's budget), round
    and trial: a final race stopped part-way, or run again by a resumed sweep, runs only
    what is not stored. Whether there was a race."""
    if rounds < 1 or finalists < 2 or study.user_attrs.get(keys.FINAL_RACE) == tag:
        return False
    level = noise.run_to_run_noise(records, prior_cv)
    top = selection.finalists(records, finalists, budget_gib)
    if not top:
        return False
    best = top[0]
    runs = {r.number: noise.runs_of(r) for r in top}
    rivals = [r for r in top[1:]
              if (g := noise.compare(runs[r.number], runs[best.number], level)) is not None
              and not g.real]
    # The baseline is what the pick falls back to when the best is not separably faster
    # than it (selection.versus_baseline, on the baseline's runs beside the best's in
    # time): then it is a contender, raced like one. A race once was skipped on the two
    # trials' runs compared whole, and the pick then took the baseline on the paired ones.
    base = selection.baseline(records)
    if base is not None and base is not best and base not in rivals and base.ok \
            and base.trial_dir and base in selection.feasible_records(records, budget_gib) \
            and not selection.versus_baseline(best, base, level)[0]:
        rivals.append(base)
        runs[base.number] = noise.runs_of(base)
    if not rivals:
        return False
    entrants = [best, *rivals]
    rounds = min(rounds, max_runs // len(entrants))
    if rounds < 1:
        return False
    sources = {r.number: r.run_dir for r in entrants}
    # A resumed sweep: the runs a stopped final race made are among each trial's runs
    # already (``runs``); they are not made, nor counted, again.
    made = {(number, rep.run) for number, reps in stored_repeats(study).items()
            for rep in reps if rep.run}
    note(f"final race: trial(s) {', '.join(str(r.number) for r in rivals)} within noise of "
         f"the best, trial {best.number}: up to {rounds} interleaved round(s), until one is "
         "separably fastest")

    def run(entrant: int, round_index: int) -> dict | None:
        key = f"final/{tag}/{round_index}/{entrant}"
        if (entrant, key) in made:
            return None
        perf = measure(sources[entrant], layout.final(tag, round_index, entrant),
                       f"{study.study_name}/final/{entrant}")
        if perf is not None:
            R.add_repeats(study, {entrant: [{**perf, Repeat.RUN: key}]}, RACE_SOURCE)
        return perf

    interleaved_rounds({r.number: runs[r.number] for r in entrants}, rounds=rounds,
                       records=records, prior_cv=prior_cv, run=run, note=note)
    study.set_user_attr(keys.FINAL_RACE, tag)
    return True
