"""Search against a scripted fake trial: racing (a trial within noise of the best is
re-measured, interleaved with the best, and the sampler is told the pooled estimate; a
clear loser is not) and the samplers ``sweep.sampler`` offers."""

from __future__ import annotations

import math

import pytest

from autotune.study.schema.keys import (
    NEIGHBOUR_ROLE,
    PREDICTED_ROLE,
    PROBE_ROLE,
    PROPOSED_AS,
    ROLE,
)


def test_a_trial_within_noise_of_the_best_is_raced_and_a_clear_loser_is_not(harness):
    harness.script()
    # The fake's speed is 1000 x threads / micro_batches: prefetch changes nothing.
    space = harness.space("race", {"data.prefetch": [16, 32], "runtime.threads": [2, 1]})
    code, out, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=3",
                                 "sweep.race.rounds=2", "sweep.race.final_rounds=0")
    assert code == 0, err
    study = harness.study()
    trials = study.get_trials()
    # The baseline measured no data wait: its data knob (prefetch) changes last.
    assert [t.params for t in trials] == [
        {"data.prefetch": 16, "runtime.threads": 2},
        {"data.prefetch": 16, "runtime.threads": 1},
        {"data.prefetch": 32, "runtime.threads": 2}]
    assert "racing trial 2 against the best, trial 0" in out
    assert "racing trial 1" not in out  # half the speed: a real difference
    repeats = study.user_attrs["autotune.repeats"]
    assert sorted(repeats) == ["0", "2"]
    assert [r["source"] for r in repeats["2"]] == ["race", "race"]
    assert len(repeats["0"]) == 2 and repeats["0"][0]["step_times_s"]
    # Told the pooled estimate (geometric mean) of its three runs.
    runs = [trials[2].user_attrs["scorecard"]["performance"]["tokens_per_s"],
            *(r["tokens_per_s"] for r in repeats["2"])]
    assert trials[2].value == pytest.approx(math.prod(runs) ** (1 / 3), rel=1e-9)
    # Each race re-run has its own directory beside the trial's.
    assert sorted(p.name for p in (harness.runs / "s" / "trial-0002").glob("race-*")) == [
        "race-0-trial-0000", "race-0-trial-0002", "race-1-trial-0000", "race-1-trial-0002"]
    # The leaderboard counts the runs each estimate rests on and states the gain.
    assert "vs base % (95% CI)" in out and "~+0%" in out


def test_the_sweep_ends_by_racing_the_finalists_within_noise_of_the_best(harness):
    harness.script()
    # The fake's speed is 1000 x threads / micro_batches: prefetch changes nothing, so the
    # baseline and its prefetch neighbour tie; one thread is half the speed.
    space = harness.space("final", {"data.prefetch": [16, 32], "runtime.threads": [2, 1]})
    code, out, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=3")
    assert code == 0, err
    # Rule: once the budget is spent, the best and the finalists within noise of it (not
    # the clear loser) run again, in turn, up to sweep.race.final_rounds rounds and never
    # more runs than the sweep launched: 3 launches, 2 entrants, 1 round.
    # (Trial 1 is the thread change, trial 2 the prefetch one: the data knob goes last.)
    assert "final race: trial(s) 2 within noise of the best, trial 0" in out \
        or "final race: trial(s) 0 within noise of the best, trial 2" in out
    assert "up to 1 interleaved round(s)" in out
    runs = sorted(p.name for p in (harness.runs / "s" / "final" / "3").iterdir())
    assert runs == ["trial-0000-run-0", "trial-0002-run-0"]
    study = harness.study()
    repeats = study.user_attrs["autotune.repeats"]
    assert "1" not in repeats and [len(repeats[k]) for k in ("0", "2")] == [1, 1]
    # Rule: the launches are the budget's; the final race's runs are not launches.
    assert sum(bool(t.user_attrs.get("launched")) for t in study.get_trials()) == 3
    # Rule: the same command again resumes a finished study: no second final race.
    code, again, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=3")
    assert code == 0, err
    assert "final race" not in again
    assert len(list((harness.runs / "s" / "final" / "3").iterdir())) == 2


@pytest.mark.parametrize("workload", ["image_cnn", "gpt_tiny"])
def test_the_baselines_neighbours_come_first_only_where_the_cost_model_cannot_time_it(
        harness, workload):
    harness.script()
    space = harness.space("order", {"data.prefetch": [16, 32], "runtime.threads": [2, 1]})
    overrides = [o for o in harness.overrides(space, "sweep.n_trials=3")
                 if o != "workload=gpt_tiny"]
    code, out, err = harness.main("sweep", *overrides, f"workload={workload}")
    assert code == 0, err + out
    trials = harness.study().get_trials()
    roles = [t.user_attrs.get(ROLE) for t in trials]
    if workload == "image_cnn":
        # Rule (sweep.neighbours=null): the cost model has no terms for a CNN, so each
        # one-knob change of the baseline runs next (the data knobs last: the baseline
        # measured no data wait).
        assert roles[1:3] == [NEIGHBOUR_ROLE, NEIGHBOUR_ROLE], roles
        assert [trials[i].params for i in (1, 2)] == [
            {"data.prefetch": 16, "runtime.threads": 1},
            {"data.prefetch": 32, "runtime.threads": 2}]
        assert "(a neighbour of the baseline)" in out
    else:
        # ... where it times the workload, its own best prediction goes first instead.
        assert NEIGHBOUR_ROLE not in roles, roles
        assert roles[1] in (PREDICTED_ROLE, PROBE_ROLE), roles


@pytest.mark.parametrize("sampler", ["grid", "random"])
def test_grid_and_random_samplers_run_the_space_and_end_when_it_is_exhausted(harness, sampler):
    harness.script()
    space = harness.space("small", {"data.prefetch": [16, 32], "runtime.threads": [2, 1]})
    code, out, err = harness.run(space, f"sweep.sampler={sampler}", "sweep.n_trials=10")
    assert code == 0, err
    launched = [t for t in harness.study().get_trials() if t.user_attrs.get("launched")]
    assert len(launched) == 4  # each point once, then the space is exhausted
    assert len({tuple(sorted(t.params.items())) for t in launched}) == 4
    assert "search space exhausted" in out


def test_every_progress_line_says_why_its_trial_was_proposed(harness):
    space = harness.space("why", {"train.micro_batches": [1, 2], "runtime.threads": [2, 1],
                                  "data.prefetch": [16, 32], "data.num_workers": [1, 2]})
    harness.script(steps=6, step_sleep=0.005)
    code, out, err = harness.run(space, "sweep.n_trials=10", "sweep.neighbours=true")
    assert code == 0, err + out
    lines = [line for line in out.splitlines() if line.startswith("trial ")]
    # Rule: each trial's lines name why it was proposed: the baseline, a one-knob
    # neighbour of it, the cost model's pick, or the sampler (by name).
    assert any("(the baseline)" in line for line in lines), lines
    assert sum("(a neighbour of the baseline)" in line for line in lines) >= 2, lines
    assert any("(the cost model's pick" in line for line in lines), lines
    assert any("(the sampler, tpe)" in line for line in lines), lines
    whys = (*(f"({why}" for why in PROPOSED_AS.values()), "(the sampler, tpe)")
    labelled = [line for line in lines if "micro=" in line]
    assert labelled and all(any(w in line for w in whys) for line in labelled), labelled
