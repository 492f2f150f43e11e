"""What ``confirm`` stores: a verdict per finalist, and how far the latest confirm got.

    autotune.confirm        {"<trial>": ConfirmVerdict, ...}
    autotune.confirm_run    ConfirmRun (the latest confirm; what a stopped one resumes)
    autotune.confirm_order  [[trial, ...], ...] (the order of each round)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.study.claims import update_attribute
from autotune.study.schema import keys
from autotune.study.schema.blob import Blob


@dataclass
class PairedTest(Blob):
    """A finalist's paired t-test against the baseline, as stored (autotune/study/noise.py)."""

    ratio: float = 0.0  # the gain: 0.05 = 5 % faster than the baseline
    low: float = 0.0  # its 95 % interval
    high: float = 0.0
    p_value: float = 1.0
    rounds: int = 0
    real: bool = False  # separable from noise
    text: str = ""

    @property
    def width(self) -> float:
        return self.high - self.low


@dataclass
class ConfirmVerdict(Blob):
    """One finalist's confirm runs: their spread, and (not the baseline) the paired test."""

    NESTED = {"vs_baseline": PairedTest}

    tokens_per_s: list[float] = field(default_factory=list)  # one per finished round
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    min: float | None = None
    max: float | None = None
    cv: float = 0.0
    vs_baseline: PairedTest | None = None
    baseline: int | None = None  # the trial number of the baseline it was tested against


@dataclass
class ConfirmPlan(Blob):
    """The runs a confirm makes: the finalists, and the order of each round."""

    trials: list[int] = field(default_factory=list)
    orders: list[list[int]] = field(default_factory=list)


@dataclass
class ConfirmRun(Blob):
    """The latest confirm: what it runs, which runs failed, whether it finished."""

    NESTED = {"plan": ConfirmPlan}

    id: str = ""
    plan: ConfirmPlan = field(default_factory=ConfirmPlan)
    failed: list[str] = field(default_factory=list)  # confirm/<id>/<trial>/<round> tags
    finished: bool = False


def confirm_verdicts(study) -> dict[int, ConfirmVerdict]:
    """confirm's verdicts on the study, by trial number."""
    return {int(k): ConfirmVerdict.from_json(v)
            for k, v in (study.user_attrs.get(keys.CONFIRM_VERDICTS) or {}).items()}


def store_confirm_verdicts(study, verdicts: dict[int, ConfirmVerdict],
                           orders: list[list[int]]) -> None:
    """Add ``verdicts`` to the stored ones (a trial's new verdict replaces its old one) and
    keep the order of this confirm's rounds."""
    update_attribute(study, keys.CONFIRM_VERDICTS, lambda stored: stored.update(
        {str(n): v.to_json() for n, v in verdicts.items()}))
    study.set_user_attr(keys.CONFIRM_ORDER, [list(order) for order in orders])


def confirm_orders(study) -> list[list[int]]:
    return [list(order) for order in study.user_attrs.get(keys.CONFIRM_ORDER) or []]


def last_confirm_run(study) -> ConfirmRun | None:
    stored = study.user_attrs.get(keys.CONFIRM_RUN)
    return ConfirmRun.from_json(stored) if stored else None


def store_confirm_run(study, run: ConfirmRun) -> None:
    study.set_user_attr(keys.CONFIRM_RUN, run.to_json())
