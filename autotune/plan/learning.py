"""The sweep's side of the cost model: predict a proposal, learn from finished trials.

Only real measurements calibrate the model: simulated trials never do. The refits are the
study's own (autotune/plan/fits.py); one whose constants leave their plausible range is
refused (autotune/plan/plausible.py) and the study keeps the fit it had.
"""

from __future__ import annotations

import threading

from autotune.plan import fits
from autotune.plan.calibration import Measurement
from autotune.plan.costmodel import CostModel
from autotune.plan.plausible import implausible
from autotune.study.records import PREDICTION, TrialRecord
from autotune.study.selection import distinct
from trials.contract.outcomes import Outcome
from trials.contract.schema import TrialConfig, memory_budget_gib


def config_of(record: TrialRecord, cache: dict[int, TrialConfig | None] | None = None,
              ) -> TrialConfig | None:
    """The trial's resolved config (read once per trial when a cache is given)."""
    if cache is not None and record.number in cache:
        return cache[record.number]
    cfg = record.config()
    if cache is not None:
        cache[record.number] = cfg
    return cfg


def measurement_of(record: TrialRecord, model: CostModel,
                   cache: dict[int, TrialConfig | None] | None = None) -> Measurement | None:
    """What a finished, real trial measured, for the fit (None if it measured nothing)."""
    if record.simulated or not record.launched:
        return None
    cfg = config_of(record, cache)
    if cfg is None:
        return None
    perf = record.perf
    if record.reason is Outcome.OK:
        step = perf.step_time_median_s
        wait = (perf.data_wait_share or 0.0) * (step or 0.0)
        return model.measurement(cfg, peak_gib=record.peak_memory_gib, step_s=step,
                                 data_wait_s=wait)
    if record.reason is Outcome.OOM:
        budget = (record.scorecard.get("resources") or {}).get("memory_budget_gib")
        return model.measurement(cfg, oom_budget_gib=budget or memory_budget_gib(cfg))
    return None


def measurements(records: list[TrialRecord], model: CostModel,
                 cache: dict[int, TrialConfig | None] | None = None) -> list[Measurement]:
    out = []
    for record in distinct(records):
        m = measurement_of(record, model, cache)
        if m is not None:
            out.append(m)
    return out


def needs_refit(record: TrialRecord, margin: float) -> bool:
    """A measured OOM, or a prediction off by more than the margin."""
    if record.reason is Outcome.OOM:
        return True
    predicted = (record.attrs.get(PREDICTION) or {})
    pairs = [(predicted.get("peak_gib"), record.peak_memory_gib),
             (predicted.get("tokens_per_s"), record.tokens_per_s)]
    return any(p and m and abs(p / m - 1) > margin for p, m in pairs)


class Refitter:
    """The sweep's refits of the cost model: after a trial whose measurement says the model
    is wrong (a measured OOM, a prediction off by more than the margin), and while the study
    has no fit of its own. Each refit is stored in the study. Concurrent trials finish in
    threads of their own."""

    def __init__(self, model: CostModel, margin: float) -> None:
        self.model = model
        self.margin = margin
        self._configs: dict[int, TrialConfig | None] = {}  # read once per trial
        self._lock = threading.Lock()

    def after_trial(self, study, records: list[TrialRecord], number: int) -> str | None:
        """Refit when due; returns the line to print when a refit was refused."""
        with self._lock:
            record = next(r for r in records if r.number == number)
            if not (needs_refit(record, self.margin) or self.model.constants is self.model.start):
                return None
            points = measurements(records, self.model, self._configs)
            fitted = self.model.fitted(points)
            if fitted == self.model.start:  # nothing measured to fit yet
                return None
            problem = implausible(fitted, points)
            if problem:
                return (f"cost model: the refit of {len(points)} trial(s) was refused ("
                        f"{problem}); predictions keep {self.model.constants.source}")
            fits.keep(study, self.model, fitted)
            return None
