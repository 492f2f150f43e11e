"""autotune.study.view: one read of the study serves every answer of one decision."""

from __future__ import annotations

import optuna

from autotune.study.view import StudyView


def test_a_view_reads_the_study_once_and_a_new_view_reads_it_again(tmp_path):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"),
                                direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=10.0, user_attrs={"reason": "ok"}))
    view = StudyView(study)
    assert [r.number for r in view.records] == [0]
    study.add_trial(optuna.trial.create_trial(value=20.0, user_attrs={"reason": "ok"}))
    # Rule: the snapshot does not change under a decision.
    assert len(view.trials) == 1 and [r.number for r in view.records] == [0]
    # Rule: a new decision takes a new view, which sees the new trial.
    fresh = StudyView(study)
    assert fresh.record(1).tokens_per_s == 20.0
    # Rule: best() answers from the same records (the faster trial here).
    assert fresh.best(None).number == 1
