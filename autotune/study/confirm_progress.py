"""How far a ``confirm`` got, kept on the study as each of its runs finishes.

A confirm stopped part-way (SIGTERM, Ctrl-C) keeps what it measured: each finished run
is stored with the trials' repeats at once, tagged with its place in the confirm
(``confirm/<id>/<trial>/<round>``), and a run that failed is noted. The same command
again, with the same finalists and rounds, resumes that confirm: it runs only what did
not finish, and each run counts once. A confirm that finished is not resumed: the next
one measures anew.

    progress = ConfirmProgress.open(study, trials=[0, 3], orders=[[3, 0], [0, 3]])
    progress.done(3, 0)                  # measured (or failed) before the stop
    progress.store(3, 0, perf)           # a finished run's performance layer; None: failed
    progress.runs(3)                     # its stored Repeat of each round, None where none
    progress.finish()
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from autotune.study.schema.confirm import (
    ConfirmPlan,
    ConfirmRun,
    last_confirm_run,
    store_confirm_run,
)
from autotune.study.schema.repeats import CONFIRM_SOURCE, Repeat, add_repeats, stored_repeats


@dataclass
class ConfirmProgress:
    study: object
    id: str
    plan: ConfirmPlan
    failed: list[str] = field(default_factory=list)
    #: Whether it continues a confirm that was stopped.
    resumed: bool = False

    @classmethod
    def open(cls, study, *, trials: list[int], orders: list[list[int]]) -> ConfirmProgress:
        """The unfinished confirm of this plan, resumed; else a new one."""
        plan = ConfirmPlan(trials=list(trials), orders=[list(order) for order in orders])
        last = last_confirm_run(study)
        if last is not None and not last.finished and _same(last.plan, plan):
            return cls(study, last.id, plan, list(last.failed), resumed=True)
        progress = cls(study, uuid.uuid4().hex[:12], plan)
        progress._save(finished=False)
        return progress

    def tag(self, trial: int, round_index: int) -> str:
        return f"confirm/{self.id}/{trial}/{round_index}"

    def _stored(self, trial: int) -> dict[int, Repeat]:
        """This confirm's stored runs of ``trial``, by round."""
        prefix = f"confirm/{self.id}/{trial}/"
        return {int(r.run[len(prefix):]): r for r in stored_repeats(self.study).get(trial, [])
                if (r.run or "").startswith(prefix)}

    def done(self, trial: int, round_index: int) -> bool:
        return (self.tag(trial, round_index) in self.failed
                or round_index in self._stored(trial))

    def store(self, trial: int, round_index: int, perf: dict | None) -> None:
        """One run's end: its performance layer stored as a repeat, or (None) noted failed."""
        if perf is None:
            self.failed.append(self.tag(trial, round_index))
            self._save(finished=False)
        else:
            tagged = {**perf, Repeat.RUN: self.tag(trial, round_index)}
            add_repeats(self.study, {trial: [tagged]}, CONFIRM_SOURCE)

    def runs(self, trial: int) -> list[Repeat | None]:
        """The stored repeat of each round of ``trial`` (None: it failed)."""
        stored = self._stored(trial)
        return [stored.get(i) for i in range(len(self.plan.orders))]

    def finish(self) -> None:
        self._save(finished=True)

    def _save(self, *, finished: bool) -> None:
        store_confirm_run(self.study, ConfirmRun(id=self.id, plan=self.plan,
                                                 failed=self.failed, finished=finished))


def _same(stored: ConfirmPlan, plan: ConfirmPlan) -> bool:
    """The same finalists and rounds (a plan stored as JSON reads its rounds as lists)."""
    return (list(stored.trials) == plan.trials
            and [list(order) for order in stored.orders] == plan.orders)
