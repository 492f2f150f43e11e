"""Knob importance: how far each knob moves tokens/s, counting the trials it got stopped.

A knob can matter most by getting its trials stopped: when every fp16 trial is
stopped as slow, the completed trials all ran fp32 and a model fitted to them
alone gives ``precision`` no effect at all. So each knob has two measures:

* ``span_tokens_per_s``: the range of its values' effects in an additive model of
  tokens/s (mean + one effect per knob value, ridge least squares) over the completed
  trials **and** the trials stopped as slow, at the tokens/s they had measured when
  stopped (a slow trial keeps them in its scorecard:
  :func:`~autotune.study.selection.measured_tokens_per_s`);
* ``stopped_share``: how far its values move the chance that a launched trial is stopped
  as slow or out of memory, in the same additive model (stopped = 1, else 0), so a value
  whose every trial was stopped, beside one whose trials ran through, counts 100 %; each
  value's own counts are kept beside it (:class:`ValueCount`).

::

    for effect in effects(records):
        print(effect.knob, effect.span_tokens_per_s, effect.stopped_share)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.study.contrasts import STOPPED
from autotune.study.records import TrialRecord
from autotune.study.selection import distinct, measured_tokens_per_s
from trials.contract.outcomes import Outcome


@dataclass(frozen=True)
class ValueCount:
    """The launched, ended trials of one knob value and how they ended."""

    value: Any
    trials: int
    completed: int
    slow: int
    oom: int

    @property
    def stopped(self) -> int:
        return self.slow + self.oom

    @property
    def share(self) -> float:
        """The share of its trials stopped as slow or out of memory."""
        return self.stopped / self.trials if self.trials else 0.0

    def text(self) -> str:
        """'fp16: 3 of 3 stopped (2 slow, 1 oom)'."""
        how = ", ".join(f"{n} {what}" for n, what in ((self.slow, "slow"), (self.oom, "oom"))
                        if n)
        return f"{self.value}: {self.stopped} of {self.trials} stopped ({how})"


@dataclass(frozen=True)
class KnobEffect:
    knob: str
    #: max - min of its values' effects in the additive model (0 with one value measured).
    span_tokens_per_s: float
    #: How far its values move the chance of a trial being stopped (:func:`stopped_shares`).
    stopped_share: float
    values: tuple[ValueCount, ...]

    @property
    def most_stopped(self) -> ValueCount | None:
        """Its value with the highest stopped share, when any of its trials was stopped."""
        stopped = [v for v in self.values if v.stopped]
        return max(stopped, key=lambda v: (v.share, v.stopped), default=None)


def modelled(records: list[TrialRecord]) -> list[TrialRecord]:
    """The trials the additive model fits: completed ones, and slow ones with what they
    had measured when stopped."""
    return [r for r in distinct(records)
            if (r.ok and r.tokens_per_s is not None)
            or (r.reason is Outcome.SLOW and measured_tokens_per_s(r) is not None)]


def _additive_spans(rows: list[tuple[dict, float]]) -> dict[str, float]:
    """Per knob, max - min of its values' effects in ``y = mean + one effect per (knob,
    value)`` fitted by ridge least squares over ``rows`` of (params, y)."""
    if not rows:
        return {}
    columns = sorted({(k, repr(v)) for params, _ in rows for k, v in params.items()})
    x = np.array([[1.0] + [float(repr(params.get(k)) == v) for k, v in columns]
                  for params, _ in rows])
    y = np.array([value for _, value in rows])
    penalty = 1e-3 * len(y) * np.eye(x.shape[1])
    penalty[0, 0] = 0.0  # the mean is not shrunk
    coef = np.linalg.solve(x.T @ x + penalty, x.T @ y)
    per_knob: dict[str, list[float]] = {}
    for (knob, _), c in zip(columns, coef[1:]):
        per_knob.setdefault(knob, []).append(float(c))
    return {k: (max(v) - min(v) if len(v) > 1 else 0.0) for k, v in per_knob.items()}


def spans(records: list[TrialRecord]) -> dict[str, float]:
    """Per knob: the tokens/s range its values span in an additive model of
    :func:`modelled` trials, largest first.

    The model is tokens/s = mean + one effect per (knob, value), fitted by ridge least
    squares, so a knob that merely co-occurred with a fast one gets little credit (the plain
    spread of per-value means would give it the same). It is robust to few trials and to
    knobs that always moved together (they share the credit); it does not model
    interactions: read it with the ablation table. A knob with one value measured scores 0.
    """
    out = _additive_spans([(r.params, measured_tokens_per_s(r)) for r in modelled(records)])
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def stopped_shares(records: list[TrialRecord]) -> dict[str, float]:
    """Per knob: how far its values move the chance that a trial is stopped (slow or out of
    memory), in the same additive model over the launched, ended trials (stopped = 1), so
    a knob whose stopped trials merely ran beside PyNative ones gets little credit. 1.0: a
    value whose every trial was stopped, beside one whose trials all ran through."""
    rows = [(r.params, float(r.reason in STOPPED)) for r in distinct(records)
            if r.launched and r.reason is not None]
    return {k: min(max(v, 0.0), 1.0) for k, v in _additive_spans(rows).items()}


def _sorted_values(values: dict) -> list:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def counts(records: list[TrialRecord], knob: str) -> tuple[ValueCount, ...]:
    """How the launched, ended trials of each value of ``knob`` ended."""
    by_value: dict = {}
    for r in distinct(records):
        if r.launched and r.reason is not None and knob in r.params:
            by_value.setdefault(r.params[knob], []).append(r)
    return tuple(ValueCount(value, len(rs), sum(r.ok for r in rs),
                            sum(r.reason is Outcome.SLOW for r in rs),
                            sum(r.reason is Outcome.OOM for r in rs))
                 for value in _sorted_values(by_value) for rs in [by_value[value]])


def best_measured(records: list[TrialRecord]) -> float | None:
    """The highest tokens/s of a completed trial (of a modelled one when none completed)."""
    done = [r.tokens_per_s for r in distinct(records) if r.ok and r.tokens_per_s is not None]
    done = done or [measured_tokens_per_s(r) for r in modelled(records)]
    return max(done, default=None)


def effects(records: list[TrialRecord]) -> list[KnobEffect]:
    """Every knob's effect, largest first: by the larger of its span as a share of the
    best tokens/s and its stopped share (a knob whose values all got stopped leads even
    when no completed trial tells its values apart)."""
    span, stopped = spans(records), stopped_shares(records)
    best = best_measured(records)
    knobs = sorted({k for r in distinct(records) for k in r.params})
    out = [KnobEffect(k, span.get(k, 0.0), stopped.get(k, 0.0), counts(records, k))
           for k in knobs]

    def size(e: KnobEffect) -> float:
        relative = e.span_tokens_per_s / best if best else 0.0
        return max(relative, e.stopped_share)

    return sorted(out, key=lambda e: (-size(e), -e.span_tokens_per_s, e.knob))
