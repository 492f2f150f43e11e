"""The tuning order as stages: correctness rules out a disagreeing precision, the sweep
respects it, each stage is stored on the study, and a second run resumes."""

from __future__ import annotations

import math

import pytest

from autotune.stages.correctness import agreement, learns
from autotune.study.schema.stages import stage_results
from autotune.study.stage_results import ruling


def test_a_finite_falling_loss_learns_and_a_flat_or_nan_one_does_not():
    assert learns([5.0, 4.5, 4.0, 3.6, 3.3, 3.1, 3.0, 2.9])[0]
    flat, why = learns([5.0, 5.01, 4.99, 5.0, 5.02, 5.0, 5.01, 5.0])
    assert not flat and "not falling" in why
    nan, why = learns([5.0, 4.0, math.nan, 3.0])
    assert not nan and "1 of 4" in why


def test_curves_agree_within_tolerance_and_disagree_beyond_it():
    ref = [5.0 - 0.1 * i for i in range(20)]
    close = [v * 1.01 for v in ref]
    far = [v * 1.2 for v in ref]
    assert agreement(ref, close, 0.05).agree
    check = agreement(ref, far, 0.05)
    assert not check.agree and check.max_rel_diff > 0.15
    assert not agreement(ref, [*ref[:10], math.inf, *ref[11:]], 0.05).agree


def test_a_ruled_out_value_is_refused_with_its_reason():
    ruled = {"precision": {"fp16": "its loss differs by 62 %"}}
    assert "62 %" in ruling(ruled, {"precision": "fp16", "train.micro_batches": 1})
    assert ruling(ruled, {"precision": "fp32", "train.micro_batches": 1}) is None


@pytest.mark.slow
def test_tune_rules_out_a_precision_forced_to_disagree_then_sweeps_without_it(harness):
    from autotune.cli import main

    space = harness.space("prec", {"precision": ["fp32", "fp16"],
                                   "train.micro_batches": [1, 2]})
    # An absurd loss scale: every fp16 step overflows and is skipped, so its loss stays
    # flat while fp32's falls.
    args = ["tune", *harness.overrides(space, "tune.stages=[correctness,memory,throughput]",
                                       "tune.correctness_steps=12", "precision.init_scale=1e30",
                                       "sweep.n_trials=2", "run.warmup_steps=1",
                                       "run.measure_steps=3", "run.adaptive=false",
                                       fake=False)]
    assert main(args) == 0
    printed = harness.capsys.readouterr().out
    assert "precision fp16: RULED OUT" in printed
    # Rule: tune ends with one verdict per stage, not only "all stages done".
    verdicts = printed.split("all stages done; the verdicts:", 1)[1]
    assert "correctness: passed; ruled out: fp16" in verdicts
    assert "memory: 4 of" in verdicts and "throughput: " in verdicts
    # Rule: the throughput verdict names the pick (it read "done: 2 trial(s) launched").
    assert "; pick trial #" in verdicts and "in the sweep" in verdicts
    study = harness.study()
    stages = stage_results(study)
    assert set(stages) == {"correctness", "memory", "throughput"}
    correctness = stages["correctness"]
    assert correctness.baseline.learns and "fp16" in correctness.ruled_out["precision"]
    assert correctness.precisions["fp16"].max_rel_diff > 0.05
    assert stages["memory"].fit == 4
    launched = [t for t in study.trials if t.user_attrs.get("launched")]
    assert launched and all(t.params["precision"] == "fp32" for t in launched)
    refused = [t for t in study.trials if t.params["precision"] == "fp16"]
    assert all("correctness stage" in t.user_attrs["detail"] for t in refused)
    # The same command again resumes: the finished stages are not run again.
    assert main(args) == 0
    again = harness.capsys.readouterr().out
    assert "stage 1/3: correctness: done earlier" in again
    assert "correctness: baseline" not in again
    # Rule: the throughput stage is the sweep run again: nothing more launched (its budget
    # is spent), a final race a stop cut short would be finished, the pick printed again.
    from autotune.study.story import PREFIX

    assert PREFIX in again and "resuming study" in again
    assert len([t for t in harness.study().trials if t.user_attrs.get("launched")]) == len(
        launched)


def test_tune_ends_with_a_verdict_per_stage_that_names_a_drift():
    from autotune.stages.verdicts import soak_issues, verdict
    from autotune.study.schema.soak import SoakVerdict
    from autotune.study.schema.stages import StageResult as R

    drifting = SoakVerdict(finished=True, drift=True, leak=False, spikes=0, resume_ok=True)
    steady = SoakVerdict(finished=True, drift=False, leak=False, spikes=0, resume_ok=True)
    # Rule: a soak that found a drift says DRIFTS in the stage's verdict; a clean one, stable.
    assert "DRIFTS" in verdict("stability", R(trial=3, issues=soak_issues(drifting)))
    assert "stable" in verdict("stability", R(trial=3, issues=soak_issues(steady)))
    assert soak_issues(steady) == []
    # Rule: a precision ruled out is named; a failed stage says FAILED.
    assert "fp16" in verdict("correctness", R(ruled_out={"precision": {"fp16": "strays"}}))
    assert "FAILED" in verdict("throughput", R(failed=True, lines=["too many failures"]))
    assert verdict("memory", R(fit=3, points=5, tight=1, over=1)).startswith(
        "memory: 3 of 5 points fit")


def test_tune_refused_on_a_study_with_nothing_to_soak_leaves_nothing_of_its_own(harness):
    """The stability stage needs a completed trial: on a study whose only trial crashed,
    tune stops with one line, and the disk reserve it held while running is gone."""
    space = harness.space("crashed", {"train.micro_batches": [1, 2]})
    harness.script([{"when": {"train.micro_batches": 1}, "do": "crash"}])
    code, _, err = harness.run(space, "sweep.n_trials=1")
    assert code == 1, err  # nothing completed
    before = sorted(p.name for p in (harness.runs / "s").iterdir())
    code, _, err = harness.main("tune", *harness.overrides(space), "tune.stages=[stability]")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (harness.runs / "s" / ".disk-reserve").exists()
    assert sorted(p.name for p in (harness.runs / "s").iterdir()) == before
