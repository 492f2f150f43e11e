"""More runs of a trial's configuration, kept on the study (a finished Optuna trial cannot
change): ``autotune.repeats`` maps a trial number to a list of :class:`Repeat`.

A repeat is a run's performance layer, cut to :data:`REPEAT_FIELDS`, with where it came
from. Its JSON is flat (the performance fields beside ``source``, ``at``...), as it has
always been stored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from autotune.study.claims import update_attribute
from autotune.study.conditions import Conditions
from autotune.study.schema import keys
from autotune.study.schema.blob import VERSION_KEY, Blob
from trials.contract.performance import Performance

#: What a repeat keeps of a run's performance (the samples comparisons resample).
REPEAT_FIELDS = (Performance.TOKENS_PER_S, Performance.TOKENS_PER_STEP,
                 Performance.STEP_TIMES_S, Performance.STEP_TIME_MEDIAN_S)
#: The source of a repeat that ``confirm`` ran (its rounds compare only with each other).
CONFIRM_SOURCE = "confirm"
#: The source of the baseline's re-measurement during the sweep (sweep.baseline_every).
BASELINE_CHECK_SOURCE = "baseline-check"
#: The source of a racing re-run (autotune/search/racing.py).
RACE_SOURCE = "race"


@dataclass
class Repeat(Blob):
    #: Keys a run's performance layer may carry beside its figures, for :meth:`of_run`.
    AT: ClassVar[str] = "at"
    RUN: ClassVar[str] = "run"

    performance: Performance = field(default_factory=Performance)
    source: str = ""  # confirm, baseline-check, race, ...
    at: float | None = None  # epoch seconds the run ended: what pairs runs in time
    conditions: Conditions | None = None  # the host's state over the run
    #: Its place in the command that ran it (confirm: ``confirm/<id>/<trial>/<round>``):
    #: what a resumed command skips, and what keeps a run from being stored twice.
    run: str | None = None

    @property
    def confirm(self) -> bool:
        return self.source == CONFIRM_SOURCE

    @property
    def under_load(self) -> bool:
        return bool(self.conditions is not None and self.conditions.contended)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.performance.pick(REPEAT_FIELDS), VERSION_KEY: self.VERSION,
                               "source": self.source, self.AT: self.at}
        if self.conditions is not None:
            out[keys.CONDITIONS] = self.conditions.to_dict()
        if self.run:
            out[self.RUN] = self.run
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Repeat:
        data = data or {}
        at = data.get(cls.AT)
        return cls(performance=Performance.from_dict(
                       {k: v for k, v in data.items() if k in REPEAT_FIELDS}),
                   source=str(data.get("source") or ""),
                   at=float(at) if at is not None else None,
                   conditions=Conditions.from_dict(data.get(keys.CONDITIONS)),
                   run=data.get(cls.RUN) or None)

    @classmethod
    def of_run(cls, perf: dict[str, Any], source: str, *, now: float | None = None) -> Repeat:
        """A run's performance layer (with ``at``, ``conditions`` and ``run`` where it has
        them) as a repeat of ``source``."""
        at = perf.get(cls.AT)
        kept = Performance.from_dict(perf).pick(REPEAT_FIELDS)
        return cls(performance=Performance.from_dict(kept),
                   source=source, at=float(at if at is not None else (now or time.time())),
                   conditions=Conditions.from_dict(perf.get(keys.CONDITIONS)),
                   run=perf.get(cls.RUN) or None)


def stored_repeats(study) -> dict[int, list[Repeat]]:
    return {int(k): [Repeat.from_json(r) for r in v]
            for k, v in (study.user_attrs.get(keys.REPEATS) or {}).items()}


def add_repeats(study, runs: dict[int, list[dict]], source: str) -> None:
    """Store more runs of trials' configurations (``{trial number: [performance, ...]}``),
    each with its source, when it ended (``at``, default now), the host's conditions of
    its run and its place in a command (``run``) where it has them. A run whose ``run`` is
    stored already is not stored again: each run counts once."""
    now = time.time()

    def add(stored: dict) -> None:
        for number, perfs in runs.items():
            earlier = stored.get(str(number), [])
            known = {r.run for r in map(Repeat.from_json, earlier) if r.run}
            kept = [Repeat.of_run(perf, source, now=now).to_json() for perf in perfs
                    if not perf.get(Repeat.RUN) or perf[Repeat.RUN] not in known]
            stored[str(number)] = [*earlier, *kept]

    update_attribute(study, keys.REPEATS, add)
