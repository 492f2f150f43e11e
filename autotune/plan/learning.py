"""The sweep's side of the cost model: predict a proposal, learn from finished trials.

Only real measurements calibrate the model: simulated trials never do. The refits are the
study's own (autotune/plan/fits.py); one whose constants leave their plausible range is
refused (autotune/plan/plausible.py) and the study keeps the fit it had.
"""

from __future__ import annotations

import threading

from autotune.plan import calibration, fits
from autotune.plan.calibration import Measurement
from autotune.plan.costmodel import CostModel
from autotune.plan.plausible import plausible_part
from autotune.study.records import PREDICTION, TrialRecord
from autotune.study.schema.prediction import StoredPrediction
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
    if record.reason in (Outcome.OK, Outcome.SLOW):
        # A step measured under other processes' load says how loaded the host was, not
        # what the configuration costs: it stays out of the time fit (its memory counts).
        step = None if record.contended else perf.step_time_s
        wait = (perf.data_wait_share or 0.0) * (step or 0.0)
        if record.reason is Outcome.SLOW:
            # Stopped as slow: its measured steps (a stopped trial's scorecard keeps only
            # those) are what makes it slow, the contrast the model most needs; its peak
            # is the peak so far, not the run's.
            return model.measurement(cfg, step_s=step, data_wait_s=wait) if step else None
        return model.measurement(cfg, peak_gib=record.peak_memory_gib, step_s=step,
                                 data_wait_s=wait)
    if record.reason is Outcome.OOM:
        budget = record.card.resources.memory_budget_gib
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


#: The fewest measured trials whose leave-one-out ranking can say the model ranks well.
MIN_RANKED_TRIALS = 5


def held_out_rank(points: list[Measurement], model: CostModel) -> float | None:
    """Spearman's rho between the measured step times of the study's trials and each one's
    prediction by a fit of the others (leave-one-out, from the model's start); None with
    fewer than MIN_RANKED_TRIALS timed trials. What seeding needs is the model's ranking
    of configurations it was not fitted on, not its fit of those it was."""
    timed = [m for m in points if m.step_s and m.peak_flops_per_device]
    if len(timed) < MIN_RANKED_TRIALS:
        return None
    from scipy.stats import spearmanr  # only when ranking: keeps start-up short

    predicted = [p.step_s for p in calibration.leave_one_out(timed, model.start)]
    rho = spearmanr(predicted, [m.step_s for m in timed]).statistic
    return float(rho) if rho == rho else None  # nan when either side is constant


def needs_refit(record: TrialRecord, margin: float) -> bool:
    """A measured OOM, or a prediction off by more than the margin (a trial stopped as
    slow by its measured steps' tokens/s)."""
    if record.reason is Outcome.OOM:
        return True
    predicted = StoredPrediction.from_json(record.attrs.get(PREDICTION))
    measured = (record.perf.tokens_per_s if record.reason is Outcome.SLOW
                else record.tokens_per_s)
    pairs = [(predicted.peak_gib, record.peak_memory_gib),
             (predicted.tokens_per_s, measured)]
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
        self._rank: tuple[tuple, float | None] = ((), None)  # per set of measurements
        self._refusal_told = False  # a sweep says once that its refits are refused

    def held_out_rank(self, records: list[TrialRecord]) -> float | None:
        """:func:`held_out_rank` of the study's measured trials, computed once per set of
        measurements (a trial still running when it was last asked counts once it ends)."""
        with self._lock:
            points = measurements(records, self.model, self._configs)
            measured = tuple((m.step_s, m.peak_gib) for m in points)
            if self._rank[0] != measured:
                self._rank = (measured, held_out_rank(points, self.model))
            return self._rank[1]

    def measured_terms(self, records: list[TrialRecord]) -> set[str]:
        """The time constants some trial of the study timed (a measured step time whose
        prediction used them): what its fits know from evidence rather than from priors."""
        with self._lock:
            points = measurements(records, self.model, self._configs)
        return set().union(*(calibration.time_terms(m) for m in points if m.step_s))

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
            kept, problem, part = plausible_part(fitted, self.model.constants, points)
            told = None
            if problem and not self._refusal_told:
                self._refusal_told = True
                told = (f"cost model: the refit of {len(points)} trial(s) was refused ("
                        f"{problem}); predictions keep {self.model.constants.source} (later "
                        "refusals in this sweep are not printed; report's prediction.md "
                        "lists every prediction against its measurement)"
                        if kept is None else
                        f"cost model: the {part} constants of the refit of {len(points)} "
                        f"trial(s) were refused ({problem}) and kept as they were; its "
                        f"other constants are used (later refusals in this sweep are not "
                        "printed)")
            if kept is None:
                return told
            fits.keep(study, self.model, kept)
            return told
