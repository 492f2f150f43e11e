"""The slow rule on constructed step streams."""

from __future__ import annotations

from autotune.pruning import slow_verdict
from autotune.settings import StopRules

RULES = StopRules(slow_ratio=0.5, slow_warmup_ratio=0.1, slow_min_steps=2)


def stream(warmup_s: list[float], measure_s: list[float], tokens: int = 1000) -> list[dict]:
    steps = [{"step": 0, "phase": "compile", "step_s": 9.0, "tokens": tokens}]
    steps += [{"step": len(steps) + i, "phase": "warmup", "step_s": t, "tokens": tokens}
              for i, t in enumerate(warmup_s)]
    steps += [{"step": len(steps) + i, "phase": "measure", "step_s": t, "tokens": tokens}
              for i, t in enumerate(measure_s)]
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
