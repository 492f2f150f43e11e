"""Noise-aware comparisons on constructed samples: intervals, separability, the paired test,
the adaptive measurement rule, and export preferring the baseline within noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.settings import ExportSettings
from autotune.study import noise
from autotune.study.choice import choose_trial
from autotune.study.records import TrialRecord, pooled_tokens_per_s
from trials.contract.events import Phase
from trials.contract.performance import Performance, tokens_per_s
from trials.contract.schema import RunConfig
from trials.contract.stats import relative_half_width, steady, step_time, step_time_interval
from trials.measurement import Measurement

TOKENS = 1024.0


def steps(median_s: float, n: int, cv: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median_s * np.exp(rng.normal(0.0, cv, size=n)))


def test_the_step_time_interval_covers_the_true_mean_about_95_percent_of_the_time():
    # Lognormal step times of scale 0.3 s: the true mean is 0.3 * exp(cv^2 / 2).
    true_mean = 0.3 * math.exp(0.05 ** 2 / 2)
    hits = 0
    for seed in range(300):
        lo, hi = step_time_interval(steps(0.3, 24, 0.05, seed))
        hits += lo <= true_mean <= hi
    assert 0.88 <= hits / 300 <= 0.995


def test_a_runs_tokens_per_s_is_its_tokens_over_the_time_its_steps_took():
    # Rule: steps at two levels, interleaved (image_cnn's graph-mode periods: ~23 ms alone,
    # ~80 ms beside the augmentation threads): tokens/s is what the run got, whichever
    # level holds more than half the steps. The median read the fast level alone (348/s).
    times = [0.023, 0.080] * 5 + [0.023]
    assert tokens_per_s(8.0, times) == pytest.approx(8.0 * len(times) / sum(times))
    assert tokens_per_s(8.0, times) == pytest.approx(8.0 / step_time(times))
    assert tokens_per_s(8.0, times) < 0.6 * 8.0 / 0.023


def test_relative_half_width_shrinks_with_more_steps_and_is_inf_for_one():
    assert relative_half_width([0.3]) == math.inf
    assert relative_half_width(steps(0.3, 64, 0.05, 1)) < relative_half_width(
        steps(0.3, 8, 0.05, 1))


def test_steady_waits_for_two_windows_that_agree():
    warming = [0.50, 0.45, 0.40, 0.36, 0.33, 0.31, 0.30, 0.30, 0.30]
    assert not steady(warming[:4], window=2, tolerance=0.05)
    assert steady(warming, window=2, tolerance=0.05)
    assert not steady(warming[:1], window=2, tolerance=0.05)


def run(median_s: float, seed: int, n: int = 24, cv: float = 0.03) -> noise.Run:
    return noise.Run(TOKENS, tuple(steps(median_s, n, cv, seed)))


def test_a_large_gain_with_little_noise_is_real():
    gain = noise.compare([run(0.25, 1)], [run(0.30, 2)], noise.Noise(0.01, "test"))
    assert gain.real and gain.better
    assert gain.low < gain.ratio < gain.high
    assert gain.ratio == pytest.approx(0.2, abs=0.03)
    assert "within noise" not in gain.text()


def test_a_small_gain_under_run_to_run_noise_is_within_noise():
    gain = noise.compare([run(0.294, 1)], [run(0.30, 2)], noise.Noise(0.05, "test"))
    assert not gain.real and gain.low < 0 < gain.high
    assert "within noise" in gain.text() and gain.short().startswith("~")


def test_runs_under_load_compare_only_with_runs_under_load():
    from dataclasses import replace

    level = noise.Noise(0.05, "test")
    # One configuration, two sides: the reference's last runs met a hog (a third slower).
    quiet = [run(0.30, s) for s in (1, 3, 5)]
    reference = [run(0.30, 2), *(replace(run(0.45, s), loaded=True) for s in (4, 6, 8))]
    pooled = noise.compare(quiet, [replace(r, loaded=False) for r in reference], level)
    assert pooled.real and pooled.better  # pooled, the load reads as a gain
    # Rule: where both sides have quiet runs, only those compare: no gain.
    alike = noise.compare(quiet, reference, level)
    assert not alike.real and abs(alike.ratio) < 0.05
    # ... and where one side ran only under load, its loaded runs meet the other's.
    loaded = [replace(run(0.45, s), loaded=True) for s in (11, 13)]
    assert abs(noise.compare(loaded, reference, level).ratio) < 0.05


def test_a_re_runs_conditions_say_whether_it_ran_under_load():
    from autotune.study.conditions import Conditions
    from autotune.study.schema.keys import CONDITIONS

    perf = {"tokens_per_step": TOKENS, "step_times_s": [0.3, 0.31, 0.29]}
    hog = Conditions(contended=True).to_dict()
    runs = noise.runs_from([perf, {**perf, CONDITIONS: hog}])
    assert [r.loaded for r in runs] == [False, True]
    given = noise.runs_from([perf, perf], conditions=[Conditions(contended=True), None])
    assert [r.loaded for r in given] == [True, False]
    # Rule: a loaded run carries the least share of its quiet speed its load can have left
    # it (1 / (1 + other cores), the slow rule's bound); a quiet one all of it.
    busy = Conditions(contended=True, other_cores=0.7).to_dict()
    assert [r.speed_left for r in noise.runs_from([perf, {**perf, CONDITIONS: busy}])] == \
        pytest.approx([1.0, 1 / 1.7])


def test_more_runs_narrow_the_interval():
    level = noise.Noise(0.05, "test")
    one = noise.compare([run(0.28, 1)], [run(0.30, 2)], level)
    three = noise.compare([run(0.28, s) for s in (1, 3, 5)], [run(0.30, s) for s in (2, 4, 6)],
                          level)
    assert (three.high - three.low) < (one.high - one.low)


def test_the_gain_interval_covers_zero_when_there_is_no_difference():
    # Synthetic noise with the stated run-to-run CV; same configuration on both sides.
    rng = np.random.default_rng(7)
    level = noise.Noise(0.05, "test")
    false_claims = 0
    for seed in range(100):
        a = run(0.3 * math.exp(rng.normal(0, 0.05)), seed)
        b = run(0.3 * math.exp(rng.normal(0, 0.05)), 1000 + seed)
        false_claims += noise.compare([a], [b], level).real
    assert false_claims <= 10  # 5 % expected at 95 % confidence


def test_paired_test_separates_a_consistent_gain_and_not_a_noisy_one():
    base = [3000, 2800, 3100, 2950]
    better = [b * 1.10 for b in base]
    test = noise.paired_test(better, base)
    assert test.gain.real and test.p_value < 0.05 and test.rounds == 4
    noisy = [b * f for b, f in zip(base, (1.06, 0.95, 1.05, 0.96))]
    test = noise.paired_test(noisy, base)
    assert not test.gain.real and test.p_value > 0.05
    assert "NOT separable" in test.text()
    assert noise.paired_test([3000], [2900]) is None


def test_the_run_to_run_noise_comes_from_repeats_once_there_are_enough():
    prior = noise.run_to_run_noise([], 0.05)
    assert prior.cv == 0.05 and "cost.run_to_run_cv" in prior.source
    records = [record(n, {"k": n}, 0.3, repeats=[0.3 * (1 + 0.01 * (-1) ** i) for i in range(3)])
               for n in range(2)]
    measured = noise.run_to_run_noise(records, 0.05)
    assert measured.cv < 0.02 and "measured" in measured.source


# --- the adaptive measurement rule -------------------------------------------------------

def drive(times: list[float], run_cfg: RunConfig, votes: list | None = None) -> Measurement:
    def agree(vote: bool) -> bool:
        if votes is not None:
            votes.append(vote)
        return vote

    m = Measurement(run_cfg, agree)
    for t in [5.0, *times]:  # the compile step first
        if m.after_step(t):
            break
    return m


def test_a_steady_trial_stops_at_the_floors():
    m = drive([0.3] * 100, RunConfig())
    assert m.warmup_end == "steady after 4 steps" and len(m.warmup_s) == 4
    assert len(m.measured_s) == 8 and m.stop_reason.startswith("interval")


def test_a_noisy_trial_measures_until_the_cap_and_says_so():
    m = drive(steps(0.3, 200, 0.3, 3), RunConfig())
    assert len(m.measured_s) == 32  # 4 x measure_steps
    assert m.stop_reason.startswith("step cap 32")


def test_warm_up_lasts_until_the_step_time_settles():
    settling = [0.6, 0.5, 0.4, 0.31, 0.30, 0.30] + [0.3] * 40
    m = drive(settling, RunConfig())
    assert len(m.warmup_s) == 7 and m.warmup_end == "steady after 7 steps"
    assert m.phase is Phase.MEASURE


def test_a_fixed_count_measures_exactly_and_asks_no_vote():
    votes: list = []
    m = drive([0.3] * 100, RunConfig(adaptive=False), votes)
    assert len(m.measured_s) == 8 and m.stop_reason == "8 steps"
    assert votes == []  # nothing depended on measured times: no collective under msrun


# --- export prefers the simpler configuration within noise -------------------------------

def record(number: int, params: dict, median_s: float, *, role: str = "sampled",
           repeats: list[float] | None = None, seed: int | None = None) -> TrialRecord:
    times = steps(median_s, 24, 0.02, number if seed is None else seed)
    perf = {"tokens_per_s": TOKENS / float(np.median(times)), "tokens_per_step": TOKENS,
            "step_times_s": times}
    r = TrialRecord(number=number, state="COMPLETE", params=params, reason=None, detail="",
                    launched=True, role=role, tokens_per_s=perf["tokens_per_s"], mfu=None,
                    peak_memory_gib=1.0, step_time_s=median_s, compile_s=1.0,
                    data_wait_share=0.0, micro_batch_size=1, started=None, wall_s=10.0,
                    trial_dir="x", reused_from=None,
                    scorecard={"performance": perf,
                               "resources": {"memory_budget_gib": 8.0}})
    for m in repeats or []:
        t = steps(m, 24, 0.02, 100 + len(r.repeats))
        r.repeats.append({"tokens_per_s": TOKENS / float(np.median(t)),
                          "tokens_per_step": TOKENS, "step_times_s": t})
    if r.repeats:
        r.tokens_per_s = pooled_tokens_per_s(r)
    return r


class _Study:
    study_name = "constructed"


def test_export_keeps_the_baseline_when_the_winner_is_within_noise():
    base = record(0, {"mode": "graph", "workers": 1}, 0.300, role="baseline")
    winner = record(1, {"mode": "graph", "workers": 2}, 0.290)
    chosen, why = choose_trial(_Study(), [base, winner], ExportSettings(), prior_cv=0.05)
    assert chosen is base
    assert "within noise" in why and "export.trial=1" in why


def test_export_takes_a_real_winner_and_prefers_fewer_changes_among_equals():
    base = record(0, {"mode": "pynative", "thr": 1, "mb": 1}, 0.60, role="baseline")
    fast = record(1, {"mode": "graph", "thr": 2, "mb": 1}, 0.300)
    fast_many = record(2, {"mode": "graph", "thr": 2, "mb": 2}, 0.298)
    chosen, why = choose_trial(_Study(), [base, fast, fast_many], ExportSettings(),
                               prior_cv=0.05)
    assert chosen is fast and "changes 2 knob(s) instead of 3" in why
    chosen, _ = choose_trial(_Study(), [base, fast, fast_many],
                             ExportSettings(prefer_simpler=False), prior_cv=0.05)
    assert chosen is fast_many


def test_a_run_measured_under_load_claims_less_than_a_quiet_one():
    from autotune.study.selection import annotate

    # The baseline's own runs spread widely (0.30 s, then 0.45 s and 0.25 s a step).
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.45, 0.25])
    quiet = record(1, {"k": 1}, 0.26)
    loaded = record(2, {"k": 2}, 0.26)
    loaded.attrs["conditions"] = {"other_cores": 1.3, "window_s": 5.0, "contended": True,
                                  "contention_cores": 0.5}
    records = [base, quiet, loaded]
    annotate(records, prior_cv=0.05)
    width = {r.number: r.vs_baseline.high - r.vs_baseline.low for r in records[1:]}
    # Rule: a contended run's interval is widened by the baseline's own spread (larger
    # than the study's pooled noise here): the same measurement, under load, claims less.
    assert loaded.contended and not quiet.contended
    assert width[2] > 1.5 * width[1]
    assert "measured under load" in loaded.vs_baseline.method
    # Rule: the pick's "vs the baseline in the sweep" is the same figure, not one judged
    # at the quiet noise (it read +41.5 %, CI +24.9..+61.9, beside the leaderboard's
    # ~+42 %, -1..+106, for one trial of a loaded study).
    from autotune.study.selection import versus_baseline

    level = noise.run_to_run_noise(records, 0.05)
    assert versus_baseline(loaded, base, level)[1] == loaded.vs_baseline.text()


def test_confirm_runs_measured_under_other_conditions_are_never_pooled_with_the_sweeps():
    from autotune.study.selection import annotate

    # The sweep measured both at 0.30 s a step; confirm ran later on a loaded machine, at
    # 0.60 s (the baseline) and 0.45 s (the trial), side by side in the same rounds.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.60, 0.60, 0.60])
    trial = record(1, {"k": 1}, 0.30, repeats=[0.45, 0.45, 0.45])
    for r in (base, trial):
        for rep in r.repeats:
            rep["source"] = "confirm"
    records = [base, trial]
    level = annotate(records, prior_cv=0.05)
    # Rule: the sweep's figures compare with the sweep's (0 %), not with a pool of the
    # sweep's run and confirm's runs taken on a machine twice as slow.
    assert abs(trial.vs_baseline.ratio) < 0.05 and trial.n_runs == 1
    # Rule: the drift between the sweep and confirm is not run-to-run noise.
    assert level.cv < 0.05
    # Rule: two trials that both have confirm runs compare those, within the rounds.
    both = noise.gain(trial, base, level)
    assert both.ratio == pytest.approx(0.60 / 0.45 - 1, abs=0.05)


def test_a_run_measured_under_load_does_not_widen_the_studys_quiet_noise():
    # Two configurations re-run three times each at about 1 % spread; one of the
    # baseline's runs was measured under load and is 36 % slower.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.30, 0.303, 0.47])
    other = record(1, {"k": 1}, 0.28, repeats=[0.28, 0.283, 0.279])
    noisy = noise.run_to_run_noise([base, other], 0.05)
    base.repeats[2]["conditions"] = {"other_cores": 0.9, "window_s": 5.0, "contended": True,
                                     "contention_cores": 0.5}
    quiet = noise.run_to_run_noise([base, other], 0.05)
    # Rule: unflagged, the slow run is noise of the study; flagged as measured under load,
    # it is left out of the noise every quiet comparison rests on.
    assert noisy.cv > 0.1
    assert quiet.cv < 0.02 and "under load left out" in quiet.source
    # Rule: where the runs left out are why there is no estimate, the prior says so (a
    # loaded study's baseline ran 7 times and read "too few repeats").
    for rep in base.repeats:
        rep["conditions"] = base.repeats[2]["conditions"]
    prior = noise.run_to_run_noise([base], 0.05)
    assert prior.cv == 0.05 and "3 run(s) under load left out" in prior.source


def test_a_quiet_trial_is_paired_with_the_quiet_baseline_runs_beside_it():
    import datetime as dt

    from autotune.study.selection import annotate

    t0 = dt.datetime(2026, 12, 1, 12, 0, 0)
    # The baseline ran at 0.30 s a step quiet (12:00 and 12:02), and at 0.45 s at 12:05
    # while other processes loaded the host; the trial ran quiet at 12:04 at 0.30 s.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.30, 0.45])
    base.finished = t0
    base.repeats[0]["at"] = (t0 + dt.timedelta(minutes=2)).timestamp()
    base.repeats[1]["at"] = (t0 + dt.timedelta(minutes=5)).timestamp()
    base.repeats[1]["conditions"] = {"other_cores": 1.1, "window_s": 5.0, "contended": True,
                                     "contention_cores": 0.5}
    trial = record(1, {"k": 1}, 0.30)
    trial.finished = t0 + dt.timedelta(minutes=4)
    annotate([base, trial], prior_cv=0.05)
    # Rule: the loaded run that came after the trial is not its pair (the load came and
    # went between them): against the quiet run before it, the trial is within noise,
    # where the pair in time alone would have claimed a gain of about +20 %.
    assert abs(trial.vs_baseline.ratio) < 0.05 and not trial.vs_baseline.real


def test_the_step_spread_is_the_median_within_run_cv_of_the_studys_completed_runs():
    from types import SimpleNamespace

    from trials.contract.outcomes import Outcome

    def rec(reason, cv):
        return SimpleNamespace(reason=reason, perf=Performance(step_time_cv=cv))

    # Rule: completed runs only (a stopped run's few steps are what is being judged).
    records = [rec(Outcome.OK, 0.5), rec(Outcome.OK, 0.1), rec(Outcome.OK, 0.3),
               rec(Outcome.SLOW, 2.0), rec(Outcome.OK, None)]
    assert noise.step_spread(records) == pytest.approx(0.3)
    assert noise.step_spread([]) == 0.0


def test_a_run_to_run_noise_estimated_from_a_few_runs_widens_by_its_own_uncertainty():
    # Rule: two equal configurations, one run each, compared at a CV estimated from 5 runs
    # (4 degrees of freedom) of a third: the interval holds no difference about 95 % of
    # the time. Taken as known, the estimate comes out low often enough that equal
    # configurations read as separable about one time in seven.
    def one_run(factor: float) -> noise.Run:
        return noise.Run(TOKENS, (0.3 / factor,) * 8)

    rng = np.random.default_rng(7)
    true_cv, trials = 0.10, 400
    covered = {"widened": 0, "as known": 0}
    for _ in range(trials):
        estimate = float(np.std(rng.normal(0.0, true_cv, size=5), ddof=1))
        a, b = (one_run(math.exp(x)) for x in rng.normal(0.0, true_cv, size=2))
        for label, level in (("widened", noise.Noise(estimate, "test", dof=4)),
                             ("as known", noise.Noise(estimate, "test"))):
            covered[label] += not noise.compare([a], [b], level).real
    assert covered["widened"] / trials >= 0.93
    assert covered["as known"] / trials < 0.92
    assert noise.Noise(0.1, "prior").interval_cv == 0.1
    assert noise.Noise(0.1, "test", dof=4).interval_cv == pytest.approx(0.1 * 2.776 / 1.960,
                                                                         rel=1e-3)


def test_the_pareto_front_ranks_trials_by_the_figure_the_leaderboard_shows():
    from autotune.study.selection import pareto_front

    base = record(0, {"k": 0}, 0.30, role="baseline")
    # Trial 1's own run read 0.40 s a step, the figure the sampler was told; raced twice
    # more at 0.20 s, its standing (every run, pooled) is faster than the baseline's, at
    # less memory.
    raced = record(1, {"k": 1}, 0.40, repeats=[0.20, 0.20])
    raced.tokens_per_s = raced.scorecard["performance"]["tokens_per_s"]
    raced.peak_memory_gib = 0.9
    assert raced.standing > base.standing > raced.tokens_per_s
    # Rule: it dominates the baseline on the leaderboard's figure: the front is it alone
    # (on its first run the baseline stayed on the front beside it).
    assert [r.number for r in pareto_front([base, raced])] == [1]


HOG = {"other_cores": 1.3, "window_s": 5.0, "contended": True, "contention_cores": 0.5}


def test_the_race_the_gain_and_the_pick_judge_loaded_runs_at_one_noise():
    from dataclasses import replace

    # The baseline's runs spread widely (0.30, 0.45, 0.25 s a step): under load, a run
    # claims that much less. Quiet runs of the study spread 2 %.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.45, 0.25])
    under_hog = record(9, {"k": 9}, 0.30)
    under_hog.attrs["conditions"] = HOG
    level = noise.run_to_run_noise([base, under_hog], prior_cv=0.05)
    # Rule: the study's noise carries the noise of loaded runs, and every comparison of
    # loaded runs takes it, whoever compares (the race dropped a rival on two loaded runs
    # judged at the quiet 5 %, where the gain beside it read within noise).
    assert level.loaded is not None and level.loaded.cv > 2 * level.cv
    fast, slow = [run(0.25, 1), run(0.25, 3)], [run(0.30, 2), run(0.30, 4)]
    assert noise.compare(fast, slow, level).better  # quiet: 20 % is separable
    loaded = noise.compare([replace(r, loaded=True) for r in fast],
                           [replace(r, loaded=True) for r in slow], level)
    assert not loaded.real and "measured under load" in loaded.method
    assert noise.separably_slower({1: fast, 2: slow}, level) == {2: 1}


def test_the_pick_starts_from_a_trial_no_other_is_separably_faster_than():
    from autotune.study.selection import verdict

    base = record(0, {"k": 0}, 0.60, role="baseline", repeats=[0.60, 0.61])
    # Trial 1 ranks first by its runs pooled (a loaded run at 0.10 s); on the runs measured
    # alike (quiet), trial 2 is separably faster: 0.30 against 0.40 s a step.
    lucky = record(1, {"k": 1}, 0.40, repeats=[0.10])
    lucky.repeats[0]["conditions"] = HOG
    steady = record(2, {"k": 2}, 0.30, repeats=[0.45])
    steady.repeats[0]["conditions"] = HOG
    records = [base, lucky, steady]
    assert lucky.standing > steady.standing
    found = verdict(records, prior_cv=0.05, prefer_simpler=False)
    # Rule: the pick never starts from a trial that another is separably faster than (the
    # final race's rule); it says which it passed over.
    assert found.top is steady and found.pick is steady
    assert "trial(s) 1 rank higher by their runs pooled" in found.why
    # ... and the pick's sentence says why the faster-looking one is not it.
    from autotune.study.story import pick_sentence

    said = pick_sentence(found, records)
    assert "not trial #1" in said and "#2 is separably faster than it" in said, said


def test_a_trial_raced_against_the_baseline_is_paired_with_the_baselines_race_runs():
    import datetime as dt

    from autotune.study.selection import nearest_baseline_runs

    t0 = dt.datetime(2026, 12, 1, 12, 0, 0)
    # The baseline ran at 12:00 and re-measured at 12:10; the trial ran at 12:01, then
    # raced it in two interleaved rounds at 12:20-12:23, each side's run beside the other's.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.30, 0.50, 0.50])
    trial = record(1, {"k": 1}, 0.30, repeats=[0.40, 0.40])
    base.finished, trial.finished = t0, t0 + dt.timedelta(minutes=1)
    for rep, minute in zip(base.repeats, (10, 20, 22)):
        rep["at"] = (t0 + dt.timedelta(minutes=minute)).timestamp()
    for rep, minute in zip(trial.repeats, (21, 23)):
        rep["at"] = (t0 + dt.timedelta(minutes=minute)).timestamp()
    paired = nearest_baseline_runs(base, trial)
    # Rule: each of the trial's runs meets the baseline's runs beside it: the race's
    # rounds are paired as the race judged them, not with the runs around its first run.
    assert len(paired) == 4
    assert sorted(round(TOKENS / r.tokens_per_s, 1) for r in paired) == [0.3, 0.3, 0.5, 0.5]


def test_a_race_under_load_measures_the_noise_of_loaded_runs_as_it_goes():
    from dataclasses import replace

    # Before the race the baseline's two runs agree (0.30, 0.31 s a step): no more noise
    # under load than the prior. Its race runs under load spread widely (0.45, 0.25 s).
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.31])
    assert noise.run_to_run_noise([base], 0.05).loaded is None
    raced = noise.runs_of(base) + [replace(run(0.45, 7), loaded=True),
                                   replace(run(0.25, 9), loaded=True)]
    level = noise.run_to_run_noise([base], 0.05, racing={0: raced})
    # Rule: the race's runs count in the noise of loaded runs as they come (a race under
    # load judged its rounds at the spread from before it and dropped a rival that the
    # spread of its own runs left within noise).
    assert level.loaded is not None and level.loaded.cv > 0.2


def test_a_study_with_no_run_under_load_states_no_noise_of_loaded_runs():
    # The baseline's own runs spread widely, as above, but nothing ran under load.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.45, 0.25])
    records = [base, record(1, {"k": 1}, 0.26)]
    # Rule: the noise of loaded runs exists only where some run was loaded (the quiet
    # replayed sweep's footer stated a "measured under load" noise of 11.4 %).
    assert noise.run_to_run_noise(records, 0.05).loaded is None
    records[1].attrs["conditions"] = {"other_cores": 1.3, "window_s": 5.0, "contended": True,
                                      "contention_cores": 0.5}
    assert noise.run_to_run_noise(records, 0.05).loaded is not None


def test_runs_measured_under_different_loads_separate_no_more_than_the_load_allows():
    from dataclasses import replace

    level = noise.Noise(0.02, "prior")
    quiet = [run(0.30, s) for s in (1, 2)]
    # The baseline's runs all met 0.7 other cores (speed left at least 1 / 1.7); the
    # trial's were quiet: no pair measured alike.
    loaded = [replace(run(0.42, s), loaded=True, speed_left=1 / 1.7) for s in (3, 4)]
    gain = noise.compare(quiet, loaded, level)
    # Rule: read +40 %, it is not separable: the load alone could have taken that much
    # from the baseline (make sweep's pick read +41.8 %, CI +15.7..+75.5 %, "separable";
    # confirm then measured +1.6 %).
    assert gain.ratio == pytest.approx(0.4, abs=0.05)
    assert not gain.real and "the load on one side's runs" in gain.method
    # ... nor the other way round: the loaded side may be faster than it read, not slower.
    back = noise.compare(loaded, quiet, level)
    assert not back.real and back.high > 0.0
    # Rule: runs measured alike (both quiet) are compared as before: separable.
    assert noise.compare(quiet, [run(0.42, s) for s in (3, 4)], level).better
