"""autotune.study.contrasts: one-knob contrasts, and the report's causes resting on them."""

from __future__ import annotations

import math

import pytest

from autotune.cli import main
from autotune.study.contrasts import contrasts, differing_knob, gain_interval, of_value
from tests.report.test_report import rec


def test_two_trials_are_a_contrast_only_when_one_knob_tells_them_apart():
    a = rec(0, tokens_per_s=1000.0, params={"mode": "graph", "prefetch": 2})
    # Rule: exactly one differing knob makes a pair; none or two do not.
    assert differing_knob(a, rec(1, params={"mode": "pynative", "prefetch": 2})) == "mode"
    assert differing_knob(a, rec(2, params={"mode": "pynative", "prefetch": 64})) is None
    assert differing_knob(a, rec(3, params={"mode": "graph", "prefetch": 2})) is None
    # Rule: a knob one trial sets and the other does not is a difference.
    assert differing_knob(a, rec(4, params={"mode": "graph"})) == "prefetch"


def test_the_interval_is_two_single_runs_of_the_noise():
    gain, low, high = gain_interval(900.0, 1000.0, 0.03)
    half = 1.96 * math.sqrt(2) * math.log(1.03)
    # Rule: the gain is the ratio less one; its interval is symmetric in the log.
    assert gain == pytest.approx(-0.1)
    assert low == pytest.approx(0.9 * math.exp(-half) - 1) and high == pytest.approx(
        0.9 * math.exp(half) - 1)
    # Rule: a 10 % loss of one run against another is beyond 3 % run-to-run noise; at 5 %
    # it is not.
    assert high < 0 and gain_interval(900.0, 1000.0, 0.05)[2] > 0


def test_a_stop_is_a_contrast_only_against_a_trial_that_completed():
    records = [rec(0, tokens_per_s=1000.0, params={"p": "fp32", "m": 1}),
               rec(1, "oom", params={"p": "fp32", "m": 4}),
               rec(2, "oom", params={"p": "fp16", "m": 4}),
               rec(3, "crash", params={"p": "fp16", "m": 1})]
    found = contrasts(records, cv=0.03)
    # Rule: #1 ran out where #0, one knob apart, completed: m=4 stopped it. #2 against #1
    # (both out of memory) says nothing; a crash is not a knob's doing.
    assert [(c.trial.number, c.reference.number, c.knob) for c in found] == [(1, 0, "m")]
    (only,) = of_value(found, "m", 4)
    assert only.slower and only.gain is None
    # Rule: an out-of-memory trial that measured some steps first is still read as a stop,
    # never as a speed (it may have been fast until it ran out).
    fast_then_out = rec(5, "oom", params={"p": "fp32", "m": 4},
                        card={"performance": {"tokens_per_s": 1500.0}})
    (stop,) = of_value(contrasts([records[0], fast_then_out], cv=0.03), "m", 4)
    assert stop.gain is None and stop.slower


def test_the_report_blames_the_slow_knob_and_not_the_one_beside_it(harness, capsys):
    """PyNative is truly slow (scripted); prefetch=64 does nothing but comes with it in
    half the grid. The report blames PyNative with its contrast and clears prefetch."""
    space = harness.space("pair", {"runtime.mode": ["graph", "pynative"],
                                   "data.prefetch": [16, 64]})
    harness.script([{"when": {"runtime.mode": "pynative"}, "do": "slow"}], steps=6,
                   step_sleep=0.005)
    code, swept, err = harness.run(space, "sweep.n_trials=4", "sweep.sampler=grid")
    assert code == 0, err + swept
    assert main(["report", *harness.overrides(space)]) == 0
    capsys.readouterr()
    diagnosis = (harness.runs / "s" / "report" / "diagnosis.md").read_text()
    slow = next(line for line in diagnosis.splitlines() if "stopped as slow" in line)
    # Rule: the true cause is named with its one-knob contrast...
    assert "runtime.mode=pynative did it: #" in slow and "differs only in runtime.mode=graph" \
        in slow, slow
    # ... and the value that merely came alongside is never blamed.
    assert "data.prefetch=64 did it" not in diagnosis and "avoid" not in slow
    # Rule: the ablation table lists the same pairs, each once, read from the baseline.
    ablation = (harness.runs / "s" / "report" / "ablation.md").read_text()
    rows = [line for line in ablation.splitlines() if line.startswith("| runtime.mode")]
    assert rows and all("| graph | pynative |" in row and "slower" in row for row in rows), rows


def test_two_completed_trials_are_compared_on_all_their_runs_as_the_pick_compares_them():
    from autotune.study import noise
    from tests.study.test_noise import record

    # First runs: the trial 0.32 s a step against the baseline's 0.30 (-6 %); the
    # baseline's three later runs read 0.36 s, the trial's two more 0.32 s.
    base = record(0, {"k": 0}, 0.30, role="baseline", repeats=[0.36, 0.36, 0.36])
    trial = record(1, {"k": 1}, 0.32, repeats=[0.32, 0.32])
    found = next(c for c in contrasts([base, trial], cv=0.05) if c.trial is trial)
    # Rule: the ablation's gain is the study's one comparison (all runs, measured alike),
    # the leaderboard's and the pick's: it read the first runs' -5.4 % beside the pick's
    # +6.2 % for the same two trials.
    level = noise.run_to_run_noise([base, trial], 0.05)
    assert found.gain == pytest.approx(noise.gain(trial, base, level).ratio)
    assert found.gain > 0.05
