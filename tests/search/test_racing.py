"""autotune.search.racing: a new trial within noise of the best is re-measured beside it."""

from __future__ import annotations

import numpy as np
import optuna

from autotune.search.racing import race
from autotune.settings import SweepSettings
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
