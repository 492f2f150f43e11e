"""The slow rule on constructed step streams."""

from __future__ import annotations

from autotune.running.pruning import slow_verdict
from autotune.settings import StopRules
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


def test_one_step_is_never_enough_even_far_behind():
    # A tiny model's 20 ms step hiccups to 200 ms on a busy machine: one step proves nothing.
    assert slow_verdict(stream([20.0], []), best=1000.0, rules=RULES) is None
    assert slow_verdict(stream([20.0, 20.0], []), best=1000.0, rules=RULES) is not None
