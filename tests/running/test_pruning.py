"""The slow rule on constructed step streams, and the pruners that ``sweep.pruner`` names."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.trial import TrialState

from autotune.running.pruning import SlowPruner, build, run_to_run_spread, slow_verdict
from autotune.settings import Pruner, StopRules, SweepSettings
from trials.contract.events import Phase, StepRecord

RULES = StopRules(slow_ratio=0.5, slow_warmup_ratio=0.1, slow_min_steps=2)


def record(step: int, phase: Phase, step_s: float, tokens: int) -> StepRecord:
    return StepRecord(step=step, phase=phase, loss=1.0, grad_norm=1.0, step_s=step_s,
                      data_wait_s=0.0, tokens=tokens, peak_rss_gib=1.0)


def stream(warmup_s: list[float], measure_s: list[float],
           tokens: int = 1000) -> list[StepRecord]:
    steps = [record(0, Phase.COMPILE, 9.0, tokens)]
    steps += [record(len(steps) + i, Phase.WARMUP, t, tokens) for i, t in enumerate(warmup_s)]
    steps += [record(len(steps) + i, Phase.MEASURE, t, tokens) for i, t in enumerate(measure_s)]
    return steps


def test_a_trial_slow_only_in_warm_up_is_not_stopped():
    # 2x slower than the best in warm-up (as a data-parallel trial was), fast when measured.
    assert slow_verdict(stream([2.0, 2.0], []), best=1000.0, rules=RULES) is None
    assert slow_verdict(stream([2.0, 2.0], [0.5, 0.5]), best=1000.0, rules=RULES) is None


def test_far_behind_in_warm_up_is_stopped_early():
    verdict = slow_verdict(stream([20.0, 20.0], []), best=1000.0, rules=RULES)
    assert verdict is not None and "warm-up" in verdict and "0.1 x best 1,000" in verdict


def test_measured_steps_are_judged_against_slow_ratio():
    verdict = slow_verdict(stream([1.0], [2.5, 2.5]), best=1000.0, rules=RULES)
    assert verdict is not None and "400 tok/s after 2 measured steps" in verdict
    # Rule: the reason names the workload's unit (an image job counts samples).
    images = slow_verdict(stream([1.0], [2.5, 2.5]), best=1000.0, rules=RULES, unit="samples")
    assert "400 samples/s after 2 measured steps" in images
    # One measured step is not enough to judge.
    assert slow_verdict(stream([1.0], [2.5]), best=1000.0, rules=RULES) is None
    # No best yet: nothing to compare with.
    assert slow_verdict(stream([1.0], [9.0, 9.0]), best=None, rules=RULES) is None


def test_warm_up_steps_past_the_floor_are_judged_like_measured_ones():
    # Warm-up goes on past its floor of 2 because the step time is not steady; the steps
    # past the floor are judged against slow_ratio, not the lenient warm-up bar.
    steps = stream([2.0, 2.0, 2.5, 2.5], [])
    verdict = slow_verdict(steps, best=1000.0, rules=RULES, warmup_floor=2)
    assert verdict is not None and "400 tok/s after 2 steady-enough warm-up steps" in verdict
    # Within the floor only the warm-up bar applies (as without a floor).
    assert slow_verdict(stream([2.5, 2.5], []), best=1000.0, rules=RULES,
                        warmup_floor=2) is None
    assert slow_verdict(steps, best=1000.0, rules=RULES) is None


def test_the_slow_line_is_cleared_by_what_run_to_run_noise_can_explain():
    # 400 tok/s in two measured steps against a best of 1,000: below 0.5 x best on its
    # steps alone, but not when one run of each may be off by 13.5 % (the image_cnn
    # landscape's run-to-run noise): exp(1.96 x 0.135 x sqrt(2)) = 1.45, and 400 x 1.45
    # clears the 500 line; a trial far behind (250) is still told slow, and says why.
    spread = run_to_run_spread(0.135, best_runs=1)
    assert spread == pytest.approx(0.135 * math.sqrt(2))
    assert run_to_run_spread(0.135, best_runs=4) < spread  # a best measured 4 times
    assert slow_verdict(stream([1.0], [2.5, 2.5]), best=1000.0, rules=RULES) is not None
    assert slow_verdict(stream([1.0], [2.5, 2.5]), best=1000.0, rules=RULES,
                        noise=spread) is None
    far = slow_verdict(stream([1.0], [4.0, 4.0]), best=1000.0, rules=RULES, noise=spread)
    assert far is not None and "run-to-run noise 19.1 % in it" in far


def test_a_few_steps_are_judged_as_spread_as_the_studys_runs_show_steps_to_be():
    # Two equal steps give a tight bootstrap, but when the study's runs show steps that
    # spread by 50 % (image_cnn's graph-mode periods alternate between two levels), two
    # steps may both sit at the slow level: the interval is at least exp(1.96 x 0.5 /
    # sqrt(2)) = 2.0x wide, and 400 tok/s clears the 500 line; 125 does not.
    assert slow_verdict(stream([1.0], [2.5, 2.5]), best=1000.0, rules=RULES,
                        step_cv=0.5) is None
    far = slow_verdict(stream([1.0], [8.0, 8.0]), best=1000.0, rules=RULES, step_cv=0.5)
    assert far is not None and "steps spread 50 % as the study's runs" in far
    # More steps narrow it: 16 steps at 333 tok/s are slow even so (x 1.28).
    assert slow_verdict(stream([1.0], [3.0] * 16), best=1000.0, rules=RULES,
                        step_cv=0.5) is not None


def test_one_step_is_never_enough_even_far_behind():
    # A tiny model's 20 ms step hiccups to 200 ms on a busy machine: one step proves nothing.
    assert slow_verdict(stream([20.0], []), best=1000.0, rules=RULES) is None
    assert slow_verdict(stream([20.0, 20.0], []), best=1000.0, rules=RULES) is not None


# -- the rule as the study's Optuna pruner ---------------------------------------------------
def asked(pruner, directions: tuple[str, ...] = ("maximize",)):
    """A running trial of an in-memory study whose pruner is ``pruner``."""
    study = optuna.create_study(directions=list(directions))
    study.pruner = pruner
    return study, study.ask()


def test_the_slow_rule_is_an_optuna_pruner_with_the_same_verdict():
    pruner = SlowPruner(RULES)
    # Rule: the rule is swappable as any Optuna pruner is (sweep.pruner).
    assert isinstance(pruner, optuna.pruners.BasePruner)
    study, trial = asked(pruner)
    steps = stream([20.0, 20.0], [])
    verdict = pruner.verdict(trial, steps, 1000.0, 0)
    # Rule: the pruner stops exactly what the slow rule stops, with its message.
    assert verdict == slow_verdict(steps, best=1000.0, rules=RULES)
    assert verdict is not None and "0.1 x best 1,000" in verdict
    # Rule: the estimate is reported to Optuna as the step's intermediate value.
    assert study.trials[0].intermediate_values == {2: 50.0}
    _, fast = asked(pruner)
    assert pruner.verdict(fast, stream([1.0, 1.0], [1.0, 1.0]), 1000.0, 0) is None


def test_the_none_pruner_never_stops_a_trial_however_far_behind():
    pruner = build(SweepSettings(pruner=Pruner.none), warmup_steps=0)
    study, trial = asked(pruner)
    assert isinstance(pruner, optuna.pruners.BasePruner)
    # Rule: sweep.pruner=none never prunes, even 100x behind after measured steps.
    assert pruner.verdict(trial, stream([20.0], [20.0, 20.0, 20.0]), 1000.0, 0) is None
    assert study.trials[0].intermediate_values  # still reported


def test_the_median_pruner_judges_against_completed_trials_past_the_warm_up():
    pruner = build(SweepSettings(pruner=Pruner.median), warmup_steps=1)
    study = optuna.create_study(direction="maximize")
    study.pruner = pruner
    for _ in range(5):  # MedianPruner's startup trials, 1000 tok/s at every step
        done = study.ask()
        for step in range(5):
            done.report(1000.0, step)
        study.tell(done, 1000.0)
    trial = study.ask()
    # Rule: within the compile step and the warm-up floor nothing is judged...
    assert pruner.verdict(trial, stream([2.5], []), None, 1) is None
    # ...past them, below the completed trials' median at that step is pruned, and said so.
    verdict = pruner.verdict(trial, stream([2.5], [2.5]), None, 1)
    assert verdict is not None and "400 tok/s at step 2" in verdict and "MedianPruner" in verdict


def test_a_pareto_study_is_never_pruned():
    study, trial = asked(SlowPruner(RULES), ("maximize", "minimize"))
    # Rule: multi-objective trials cannot report; a slow one may be on the memory front.
    assert study.pruner.verdict(trial, stream([20.0, 20.0], []), 1000.0, 0) is None


def test_sweep_pruner_none_lets_a_slow_trial_finish(harness):
    space = harness.space("slowpoke", {"data.prefetch": [16, 7]})
    harness.script([{"when": {"data.prefetch": 7}, "do": "slow"}])
    code, _, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=2",
                               "sweep.pruner=none", "sweep.stop.slow_min_steps=2")
    assert code == 0, err
    slow = next(t for t in harness.study().trials if t.params["data.prefetch"] == 7)
    # Rule: with sweep.pruner=none the trial 10x behind the best runs to its end.
    assert (slow.state, slow.user_attrs["reason"]) == (TrialState.COMPLETE, "ok")
    assert len(slow.intermediate_values) == 5  # every step after the compile step


def test_steps_that_scatter_too_widely_to_claim_it_do_not_stop_a_trial():
    # The median step (2.5 s: 400 tok/s) is below the bar (0.5 x 1,000) either way...
    tight = stream([1.0], [2.5, 2.5, 2.5])
    scattered = stream([1.0], [2.5, 2.5, 0.9])  # one step as fast as the best's
    # Rule: tight steps claim it, and the verdict is the interval's, not the median's.
    assert slow_verdict(tight, best=1000.0, rules=RULES) is not None
    # Rule: when the 95 % interval of its tokens/s reaches the bar, it is not stopped
    # (a busy machine scatters a few steps this much).
    assert slow_verdict(scattered, best=1000.0, rules=RULES) is None
