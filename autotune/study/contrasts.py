"""One-knob contrasts: the evidence a causal sentence about a knob rests on.

A **contrast** is two trials of the study whose knob values differ in exactly one knob
(the sweep's neighbours of the baseline are such pairs by construction; TPE's and the
sampler's proposals sometimes are). What it shows is read from the two trials alone:

* both completed: the gain of one against the other over all their runs measured alike,
  the one comparison the leaderboard, the race and the pick make (:func:`noise.gain`, at
  the study's run-to-run noise, ``cv`` its prior); one stopped as slow with what it had
  measured: its one run against the other's, with a 95 % interval from the run-to-run
  noise of two single runs (``cv``); the knob's value is a cause only when the interval
  excludes zero;
* one stopped (slow, out of memory) where the other, differing only in that knob,
  completed: the knob's value is what stopped it.

A knob value that only ever changed alongside others has no contrast: it may be said to
have been *untested alongside* the values that did the harm, never to have caused it::

    found = contrasts(records, cv=0.03)
    for c in of_value(found, "runtime.mode", "pynative"):
        print(c.text())
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.study import noise
from autotune.study.records import TrialRecord
from autotune.study.selection import baseline, distinct, measured_tokens_per_s
from trials.contract.outcomes import Outcome

#: Two-sided 95 % normal quantile: the interval a contrast's gain is read with.
Z95 = 1.96
#: How a trial can end that its knob values may explain (slow, out of memory): what a
#: contrast reads as a stop and the importance model counts as stopped.
STOPPED = (Outcome.SLOW, Outcome.OOM)


@dataclass(frozen=True)
class Contrast:
    """``trial`` against ``reference``: the two differ in ``knob`` only."""

    knob: str
    trial: TrialRecord
    reference: TrialRecord
    #: trial's tokens/s over reference's, minus 1; None when either measured none.
    gain: float | None
    #: The 95 % interval of ``gain`` from the run-to-run noise of two single runs.
    low: float | None
    high: float | None

    @property
    def value(self) -> Any:
        return self.trial.params.get(self.knob)

    @property
    def other(self) -> Any:
        return self.reference.params.get(self.knob)

    @property
    def stopped_it(self) -> bool:
        """The trial was stopped (slow, out of memory) where its reference completed."""
        return self.trial.reason in STOPPED and self.reference.ok

    @property
    def slower(self) -> bool:
        """The value made the trial slower beyond noise, or is what stopped it."""
        if self.high is not None:
            return self.high < 0.0
        return self.stopped_it

    @property
    def within_noise(self) -> bool:
        return self.low is not None and self.high is not None and self.low <= 0.0 <= self.high

    def text(self) -> str:
        """'#3 against #0, which differs only in runtime.mode=graph: -85.0 % (95 % interval
        -86.6..-83.2 %)', or '... was stopped as slow where #0 ... completed'."""
        pair = (f"#{self.trial.number} against #{self.reference.number}, which differs only "
                f"in {self.knob}={self.other}")
        if self.gain is not None and self.low is not None and self.high is not None:
            return (f"{pair}: {100 * self.gain:+.1f} % (95 % interval {100 * self.low:+.1f}.."
                    f"{100 * self.high:+.1f} %)")
        ended = "ran out of memory" if self.trial.reason is Outcome.OOM else (
            "was stopped as slow" if self.trial.reason is Outcome.SLOW else "completed")
        return f"#{self.trial.number} {ended} where #{self.reference.number}, which differs " \
               f"only in {self.knob}={self.other}, completed"


def differing_knob(a: TrialRecord, b: TrialRecord) -> str | None:
    """The one knob whose value differs between the two trials, else None."""
    differ = [k for k in a.params.keys() | b.params.keys()
              if repr(a.params.get(k)) != repr(b.params.get(k))]
    return differ[0] if len(differ) == 1 else None


def gain_interval(trial_tps: float, reference_tps: float, cv: float
                  ) -> tuple[float, float, float]:
    """(gain, low, high): the ratio of two single runs, with the 95 % interval of its log
    from each run's lognormal noise of coefficient of variation ``cv``."""
    log_ratio = math.log(trial_tps / reference_tps)
    half = Z95 * math.sqrt(2.0) * math.log1p(cv)
    return math.exp(log_ratio) - 1.0, math.exp(log_ratio - half) - 1.0, \
        math.exp(log_ratio + half) - 1.0


def contrasts(records: Sequence[TrialRecord], *, cv: float) -> list[Contrast]:
    """Every ordered pair of distinct launched trials one knob apart, where the trial
    ended ok or stopped (slow, out of memory) and the pair says something: both measured
    tokens/s, or the trial was stopped where the reference completed."""
    ran = [r for r in distinct(list(records))
           if r.launched and (r.ok or r.reason in STOPPED)]
    level = noise.run_to_run_noise(list(records), cv)
    found = []
    for trial in ran:
        for reference in ran:
            if reference is trial or (knob := differing_knob(trial, reference)) is None:
                continue
            t, r = measured_tokens_per_s(trial), measured_tokens_per_s(reference)
            both = trial.ok and reference.ok and noise.gain(trial, reference, level)
            # Running out of memory is not a speed: it is read as the stop it is, whatever
            # the trial had measured before it.
            if both:  # the study's one comparison (it read -5.4 % on first runs beside +6.2)
                found.append(Contrast(knob, trial, reference, both.ratio, both.low, both.high))
            elif t and r and trial.reason is not Outcome.OOM:
                found.append(Contrast(knob, trial, reference, *gain_interval(t, r, cv)))
            elif trial.reason in STOPPED and reference.ok:
                found.append(Contrast(knob, trial, reference, None, None, None))
    return found


def once(found: Iterable[Contrast], anchor: dict[str, Any] | None = None) -> list[Contrast]:
    """Each pair once, read from the ``anchor``'s value (the baseline's params) where one
    side has it, else the later trial against the earlier; a stop only exists one way."""
    anchor = anchor or {}

    def keep(c: Contrast) -> bool:
        if c.gain is None:
            return True
        here = c.knob in anchor
        if here and repr(c.other) == repr(anchor[c.knob]):
            return True
        if here and repr(c.value) == repr(anchor[c.knob]):
            return False
        return c.trial.number > c.reference.number

    return [c for c in found if keep(c)]


def pairs(records: Sequence[TrialRecord], *, cv: float) -> list[Contrast]:
    """The study's contrasts, each pair once, read from the baseline's values where it can
    be: what the ablation table and the knob-effects figure show."""
    base = baseline(list(records))
    return once(contrasts(records, cv=cv), base.params if base is not None else None)


def of_value(found: Iterable[Contrast], knob: str, value: Any) -> list[Contrast]:
    """The contrasts that isolate ``knob=value`` (on the trial's side)."""
    return [c for c in found if c.knob == knob and repr(c.value) == repr(value)]


def how_to_isolate() -> str:
    """What to run to get a one-knob contrast the study lacks."""
    return ("`sweep.neighbours=true` launches each one-knob change of the baseline first, "
            "which isolates every knob of the space")
