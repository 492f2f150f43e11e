"""autotune.search.racing: a new trial within noise of the best is re-measured beside it."""

from __future__ import annotations

import dataclasses

import numpy as np
import optuna
import pytest

from autotune.search.racing import final_race, race
from autotune.settings import SweepSettings
from autotune.study import selection
from autotune.study.layout import StudyLayout
from tests.fakes import rec

TOKENS = 1000.0


def perf(median_s: float, seed: int) -> dict:
    times = list(median_s * np.exp(np.random.default_rng(seed).normal(0, 0.02, 24)))
    return {"tokens_per_s": TOKENS / float(np.median(times)), "tokens_per_step": TOKENS,
            "step_times_s": times}


def setting(tmp_path):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    layout = StudyLayout.of(SweepSettings(runs_dir=str(tmp_path)))
    leader = rec(0, tokens_per_s=TOKENS / 0.1, card={"performance": perf(0.1, 1)},
                 trial_dir=str(tmp_path / "trial-0"))
    return study, layout, leader


def test_a_trial_within_noise_is_raced_in_interleaved_rounds_and_pooled(tmp_path):
    study, layout, leader = setting(tmp_path)
    calls, notes = [], []

    def measure(source, run_dir, name):
        calls.append(name.rsplit("/", 1)[-1])
        return perf(0.1, len(calls) + 10)

    own = perf(0.101, 2)
    pooled = race(study, 5, own, leader, [leader], rounds=2, prior_cv=0.05, layout=layout,
                  measure=measure, note=notes.append)
    # Rule: R rounds, each measuring the leader and the new trial, interleaved.
    assert calls == ["0", "5", "0", "5"]
    assert notes and "racing trial 5 against the best, trial 0" in notes[0]
    # Rule: the new trial's estimate pools its own run with its race runs.
    assert pooled is not None and 0.9 * TOKENS / 0.1 < pooled < 1.1 * TOKENS / 0.1
    # Rule: every race run is stored as a repeat of its trial, source "race".
    repeats = study.user_attrs["autotune.repeats"]
    assert [len(repeats["0"]), len(repeats["5"])] == [2, 2]
    assert {r["source"] for r in repeats["5"]} == {"race"}


def test_no_race_when_the_gain_is_real_or_racing_is_off(tmp_path):
    study, layout, leader = setting(tmp_path)

    def measure(*_):
        raise AssertionError("no run may be made")

    # Rule: a clearly faster (or slower) trial is not within noise: no race, None.
    assert race(study, 5, perf(0.05, 2), leader, [leader], rounds=2, prior_cv=0.05,
                layout=layout, measure=measure, note=lambda _: None) is None
    # Rule: rounds=0 or no leader run directory: no race.
    assert race(study, 5, perf(0.1, 2), leader, [leader], rounds=0, prior_cv=0.05,
                layout=layout, measure=measure, note=lambda _: None) is None
    leader.trial_dir = None
    assert race(study, 5, perf(0.1, 2), leader, [leader], rounds=2, prior_cv=0.05,
                layout=layout, measure=measure, note=lambda _: None) is None


def test_a_race_stops_at_the_first_round_that_separates_the_two(tmp_path):
    study, layout, leader = setting(tmp_path)
    calls, notes = [], []

    def measure(source, run_dir, name):
        entrant = name.rsplit("/", 1)[-1]
        calls.append(entrant)
        # The leader's first run was lucky: re-measured, it is 30 % slower than the new one.
        return perf(0.13 if entrant == "0" else 0.1, len(calls) + 10)

    # Within noise of the leader's one (lucky) run: raced.
    race(study, 5, perf(0.104, 2), leader, [leader], rounds=3, prior_cv=0.05, layout=layout,
         measure=measure, note=notes.append)
    # Rule: up to R rounds; after each, the two are compared on all their runs, and the race
    # ends once one is separably faster (here after the first: 2 runs, not 6).
    assert calls == ["0", "5"]
    assert "up to 3 interleaved round(s)" in notes[0]


# -- the final race (sweep.race.finalists, sweep.race.final_rounds) ------------------------
def finalist(tmp_path, number: int, median_s: float, seed: int):
    return rec(number, tokens_per_s=TOKENS / median_s, card={"performance": perf(median_s, seed)},
               trial_dir=str(tmp_path / f"trial-{number}"))


def final(study, records, layout, measure, notes, *, finalists=3, rounds=3, tag="12",
          max_runs=12):
    return final_race(study, records, finalists=finalists, rounds=rounds, max_runs=max_runs,
                      budget_gib=None, prior_cv=0.05, layout=layout, measure=measure,
                      note=notes.append, tag=tag)


def test_the_final_race_runs_the_best_and_its_rivals_within_noise_until_one_is_fastest(tmp_path):
    study, layout, _ = setting(tmp_path)
    # Trial 3's one run was lucky (its configuration runs at 0.13 s a step); trial 1 is the
    # fastest; trial 2 is 40 % slower than the best: separable already, not raced.
    records = [finalist(tmp_path, 3, 0.095, 1), finalist(tmp_path, 1, 0.1, 2),
               finalist(tmp_path, 2, 0.14, 3)]
    truth = {3: 0.13, 1: 0.1, 2: 0.14}
    calls, notes = [], []

    def measure(source, run_dir, name):
        entrant = int(name.rsplit("/", 1)[-1])
        calls.append(entrant)
        return perf(truth[entrant], len(calls) + 10)

    assert final(study, records, layout, measure, notes)
    # Rule: the best and its rivals within noise run in turn; the race ends at the first
    # round after which one is separably faster than the rest.
    assert calls == [3, 1]
    assert "final race: trial(s) 1 within noise of the best, trial 3" in notes[0]
    # Rule: each round's outcome is one line of progress.
    assert notes[1:] == ["  round 1/3: trial 1 is separably fastest"]
    # Rule: each run is stored as a race repeat of its trial, keyed by budget, round, trial;
    # the stored runs make the fastest configuration the pick.
    repeats = study.user_attrs["autotune.repeats"]
    assert [r["run"] for r in repeats["3"]] == ["final/12/0/3"]
    reread = [dataclasses.replace(r, repeats=repeats.get(str(r.number), [])) for r in records]
    assert selection.best(reread, None).number == 1
    # Rule: a resumed sweep with the same budget does not race again.
    assert not final(study, reread, layout, measure, notes)
    assert calls == [3, 1]


def test_a_load_that_meets_one_finalists_runs_only_separates_no_one(tmp_path):
    from autotune.study.conditions import Conditions
    from autotune.study.schema.keys import CONDITIONS

    study, layout, _ = setting(tmp_path)
    # Trials 0 and 1 run alike (0.1 s a step, quiet); a hog that comes and goes meets each
    # of trial 0's re-runs, which then read a third slower.
    records = [finalist(tmp_path, 0, 0.1, 1), finalist(tmp_path, 1, 0.1, 2)]
    hog = {CONDITIONS: Conditions(contended=True).to_dict()}
    calls, notes = [], []

    def measure(source, run_dir, name):
        entrant = int(name.rsplit("/", 1)[-1])
        calls.append(entrant)
        return perf(0.1, len(calls) + 10) if entrant else {**perf(0.15, len(calls) + 10), **hog}

    assert final(study, records, layout, measure, notes)
    # Rule: the loaded runs compare only with loaded runs: no round separates the two
    # (pooled, trial 1 read separably faster after the first round).
    assert calls == [0, 1] * 3
    assert notes[1:] == [f"  round {i}/3: all still within noise" for i in (1, 2, 3)]


def test_a_stopped_final_race_resumes_without_running_what_it_ran(tmp_path):
    study, layout, _ = setting(tmp_path)
    records = [finalist(tmp_path, 1, 0.1, 1), finalist(tmp_path, 2, 0.1, 2)]
    calls = []

    def measure(source, run_dir, name):
        calls.append(int(name.rsplit("/", 1)[-1]))
        if len(calls) == 2:
            raise KeyboardInterrupt  # stopped in round 0, after trial 1's run was stored
        return perf(0.1, len(calls) + 10)

    with pytest.raises(KeyboardInterrupt):
        final(study, records, layout, measure, [], rounds=1)
    repeats = study.user_attrs["autotune.repeats"]
    reread = [dataclasses.replace(r, repeats=repeats.get(str(r.number), [])) for r in records]
    calls.clear()
    final(study, reread, layout, lambda s, d, name: calls.append(int(name.rsplit("/", 1)[-1]))
          or perf(0.1, 30), [], rounds=1)
    # Rule: the run stored before the stop is not made again; the one that was not, is.
    assert calls == [2]
    assert [len(study.user_attrs["autotune.repeats"][k]) for k in ("1", "2")] == [1, 1]


def test_no_final_race_without_rivals_within_noise_or_when_it_is_off(tmp_path):
    study, layout, _ = setting(tmp_path)

    def measure(*_):
        raise AssertionError("no run may be made")

    separated = [finalist(tmp_path, 1, 0.05, 1), finalist(tmp_path, 2, 0.1, 2)]
    tied = [finalist(tmp_path, 1, 0.1, 1), finalist(tmp_path, 2, 0.1, 2)]
    # Rule: no rival within noise of the best: nothing to race.
    assert not final(study, separated, layout, measure, [])
    # Rule: finalists below 2 or no rounds: off.
    assert not final(study, tied, layout, measure, [], finalists=1)
    assert not final(study, tied, layout, measure, [], rounds=0)


def test_the_race_judges_each_round_at_the_noise_its_own_runs_measure(tmp_path):
    study, layout, _ = setting(tmp_path)
    # Four configurations that run alike (0.1 s a step), each run once; the profile's prior
    # says 5 % run-to-run noise, but this workload's runs spread ~10 %.
    records = [finalist(tmp_path, n, 0.1, n) for n in (1, 2, 3, 4)]
    first_round = {1: 1.0, 2: 1.18, 3: 0.85, 4: 1.1}
    calls, notes = [], []

    def measure(source, run_dir, name):
        entrant = int(name.rsplit("/", 1)[-1])
        calls.append(entrant)
        return perf(0.1 * (first_round[entrant] if len(calls) <= 4 else 1.0), len(calls) + 10)

    assert final(study, records, layout, measure, notes, finalists=4, rounds=2)
    # Rule: after each round the noise is re-measured with the race's runs (4 degrees of
    # freedom here: the study's own estimate replaces the prior). At the prior's 5 %,
    # trial 2 (+18 %) would leave after round 1 as separably slower than trial 3 (-15 %).
    assert notes[1] == "  round 1/2: all still within noise"
    assert calls == [1, 2, 3, 4] * 2


def test_the_final_race_never_runs_more_than_the_sweep_launched(tmp_path):
    study, layout, _ = setting(tmp_path)
    tied = [finalist(tmp_path, n, 0.1, n) for n in (1, 2, 3, 4)]
    calls, notes = [], []

    def measure(source, run_dir, name):
        calls.append(int(name.rsplit("/", 1)[-1]))
        return perf(0.1, len(calls) + 10)

    # Rule: 4 entrants within noise, up to 6 rounds, a sweep of 9 launches: 2 rounds (8
    # runs), said in its first line; fewer launches than entrants: no race.
    assert final(study, tied, layout, measure, notes, finalists=4, rounds=6, max_runs=9)
    assert calls == [1, 2, 3, 4] * 2
    assert "up to 2 interleaved round(s)" in notes[0]
    assert not final(study, tied, layout, measure, notes, finalists=4, rounds=6, max_runs=3,
                     tag="3")
    assert len(calls) == 8


def test_the_baseline_races_when_the_best_is_not_separably_faster_than_the_runs_beside_it(
        tmp_path):
    import datetime as dt

    study, layout, _ = setting(tmp_path)
    t0 = dt.datetime(2026, 12, 5, 12, 0, 0)
    # The baseline ran slow at first (0.14 s a step, twice), then at 0.11 and 0.105 s around
    # the best's one run (0.10 s, at 12:03:20): all its runs together, the best is separably
    # faster (~+23 %); beside it in time, the gain the pick reads, within noise (~+7 %).
    base = finalist(tmp_path, 0, 0.14, 1)
    base.role, base.finished = "baseline", t0
    base.repeats = [perf(m, 5 + i) | {"at": (t0 + dt.timedelta(seconds=at)).timestamp()}
                    for i, (m, at) in enumerate([(0.14, 60), (0.11, 120), (0.105, 300)])]
    best = finalist(tmp_path, 1, 0.10, 2)
    best.finished = t0 + dt.timedelta(seconds=200)
    records = [base, best]
    level = selection.noise.run_to_run_noise(records, 0.05)
    assert selection.noise.gain(best, base, level).better
    assert not selection.versus_baseline(best, base, level)[0]
    calls, notes = [], []

    def measure(source, run_dir, name):
        calls.append(int(name.rsplit("/", 1)[-1]))
        return perf(0.105 if calls[-1] == 0 else 0.10, len(calls) + 10)

    # Rule: the pick would fall back to the baseline, so the baseline is a contender: the
    # race runs it beside the best (it was skipped, and the pick then took the baseline on
    # the runs the race never compared).
    assert final(study, records, layout, measure, notes)
    assert "trial(s) 0 within noise of the best, trial 1" in notes[0]
    assert calls[:2] == [1, 0]
