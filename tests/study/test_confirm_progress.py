"""autotune.study.confirm_progress: a stopped confirm keeps what it measured and resumes."""

from __future__ import annotations

import optuna

from autotune.study.confirm_progress import ConfirmProgress
from autotune.study.schema.confirm import last_confirm_run
from autotune.study.schema.repeats import stored_repeats


def study(tmp_path):
    return optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))


PERF = {"tokens_per_s": 100.0, "tokens_per_step": 10.0, "step_times_s": [0.1, 0.1]}


def test_a_stopped_confirm_resumes_with_what_it_measured(tmp_path):
    s = study(tmp_path)
    first = ConfirmProgress.open(s, trials=[0, 3], orders=[[3, 0], [0, 3]])
    first.store(3, 0, PERF)
    first.store(0, 0, None)  # failed
    # Rule: the same plan, unfinished, is resumed: same id, its runs done, failures kept.
    again = ConfirmProgress.open(s, trials=[0, 3], orders=[[3, 0], [0, 3]])
    assert again.resumed and again.id == first.id
    assert again.done(3, 0) and again.done(0, 0) and not again.done(3, 1)
    # Rule: runs() gives each round's stored repeat, None where none.
    runs = again.runs(3)
    assert runs[1] is None and runs[0].performance.tokens_per_s == 100.0
    # Rule: a stored run is stored once, even if stored again after a resume.
    again.store(3, 0, PERF)
    assert len(stored_repeats(s)[3]) == 1


def test_a_finished_or_different_confirm_measures_anew(tmp_path):
    s = study(tmp_path)
    first = ConfirmProgress.open(s, trials=[0, 3], orders=[[3, 0]])
    first.store(3, 0, PERF)
    # Rule: another plan is a new confirm.
    other = ConfirmProgress.open(s, trials=[0, 3], orders=[[0, 3]])
    assert not other.resumed and other.id != first.id and not other.done(3, 0)
    other.finish()
    assert last_confirm_run(s).finished is True
    # Rule: a finished confirm is not resumed, even with the same plan.
    third = ConfirmProgress.open(s, trials=[0, 3], orders=[[0, 3]])
    assert not third.resumed and third.id != other.id
