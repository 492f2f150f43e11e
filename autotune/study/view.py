"""One read of the study for one decision.

The sweep decides many things about one proposal (reuse it? does an OOM dominate
it? which trial leads? how does it compare with the baseline?). Each answer reads
the study; a view reads it once, when first asked, and serves every answer of that
decision from the same snapshot. A new decision takes a new view.
"""

from __future__ import annotations

from functools import cached_property

import optuna
from optuna.trial import FrozenTrial

from autotune.study import selection
from autotune.study.records import TrialRecord, load_records


class StudyView:
    def __init__(self, study: optuna.Study) -> None:
        self.study = study

    @cached_property
    def trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    @cached_property
    def records(self) -> list[TrialRecord]:
        return load_records(self.study, trials=self.trials)

    def record(self, number: int) -> TrialRecord:
        return next(r for r in self.records if r.number == number)

    def best(self, budget_gib: float | None) -> TrialRecord | None:
        return selection.best(self.records, budget_gib)
