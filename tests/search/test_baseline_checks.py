"""autotune.search.baseline_checks: the baseline re-measured every K launches."""

from __future__ import annotations

import optuna

from autotune.search.baseline_checks import BaselineChecks
from autotune.settings import SweepSettings
from autotune.study.layout import StudyLayout
from tests.fakes import rec
from trials.contract.compose import compose
from trials.contract.schema import to_trial_config
from trials.contract.trial_dir import TrialDir


def test_due_every_k_launches_or_when_asked():
    checks = BaselineChecks(2, layout=None, measure=None, note=print)
    checks.launched()
    # Rule: not before K launches since the last measurement.
    assert not checks.due()
    checks.launched()
    assert checks.due()
    # Rule: every=0 never falls due by count, but a request makes it due at once.
    never = BaselineChecks(0, layout=None, measure=None, note=print)
    for _ in range(5):
        never.launched()
    assert not never.due()
    never.request()
    assert never.due()


def baseline(tmp_path, tokens_per_s: float):
    run_dir = TrialDir(tmp_path / "trial-0")
    run_dir.write_config(to_trial_config(compose("trial", ["workload=gpt_tiny"])))
    return rec(0, tokens_per_s=tokens_per_s, role="baseline", trial_dir=str(run_dir.path),
               card={"performance": {"tokens_per_s": tokens_per_s}})


def test_a_check_stores_the_run_and_says_when_the_machine_speed_changed(tmp_path):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    layout = StudyLayout.of(SweepSettings(runs_dir=str(tmp_path)))
    notes, dirs = [], []

    def measure(source, run_dir, name):
        dirs.append(run_dir.path.name)
        return {"tokens_per_s": 50.0}

    checks = BaselineChecks(1, layout, measure, notes.append)
    checks.launched()
    got = checks.check(study, [baseline(tmp_path, 100.0)])
    # Rule: the run is returned and stored as a repeat of the baseline ("baseline-check").
    assert got.tokens_per_s == 50.0
    assert [r["source"] for r in study.user_attrs["autotune.repeats"]["0"]] == ["baseline-check"]
    # Rule: a run 2x off its first (beyond SPEED_CHANGE) is reported as the machine's speed.
    assert "0.50x its first run" in notes[-1] and "speed changed" in notes[-1]
    # Rule: checking resets the count.
    assert not checks.due()


def test_no_baseline_or_a_failed_run_measures_nothing_new(tmp_path):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    layout = StudyLayout.of(SweepSettings(runs_dir=str(tmp_path)))
    notes = []
    checks = BaselineChecks(1, layout, lambda *_: None, notes.append)
    # Rule: no baseline yet: nothing run, None.
    assert checks.check(study, [rec(3, tokens_per_s=1.0)]) is None and notes == []
    # Rule: a failed re-measurement is noted and gains keep the earlier runs.
    assert checks.check(study, [baseline(tmp_path, 100.0)]) is None
    assert "failed" in notes[-1] and "autotune.repeats" not in study.user_attrs
