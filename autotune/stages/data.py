"""Stage 3, data: a data-bound baseline has its input pipeline fixed first.

The method fixes the input pipeline before anything else: a step that waits on data
(or whose pipeline takes the cores the step needs) is bound by the data, and no other
knob moves it. So this stage measures the baseline, and when it is data-bound (by its
data wait or its pipeline probe: autotune/study/data_bound.py) tries the search space's
data knobs first, one at a time: each one-knob change of the baseline's
``data.num_workers``, ``data.multiprocessing``, ``data.prefetch``, ``data``. Its trials
are the study's, so the throughput stage's sweep goes on from them (and its
neighbours, when ``sweep.neighbours=true``, keep the data knobs first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autotune.search.space import format_value
from autotune.study.budget import count_launches
from autotune.study.data_bound import CHEAPER_PREPROCESSING, DATA_KNOBS, data_bound_evidence
from autotune.study.noise import Gain
from autotune.study.records import TrialRecord, load_records
from autotune.study.schema.stages import DataResult
from autotune.study.selection import annotate, baseline
from autotune.study.sweep_end import SweepOutcome
from autotune.sweep_context import SweepContext


@dataclass(frozen=True)
class Tried:
    """A data change of the baseline that ran, and its gain over it."""

    trial: int
    change: str  # "data.num_workers=2"
    outcome: str
    gain: Gain | None  # over the baseline in the sweep (the leaderboard's); None: none


def run_data(context: SweepContext, sweep_until: Callable[[int], SweepOutcome]
             ) -> DataResult:
    """The stage's result; ``sweep_until(n)`` runs the sweep until the study has launched
    ``n`` trials (the baseline's one-knob changes first)."""
    study = context.open_study()
    base = _baseline(study)
    if base is None:
        outcome = sweep_until(count_launches(study) + 1)
        if outcome.exit_code != 0:
            return DataResult(done=False, failed=True,
                              lines=[outcome.message.splitlines()[0]])
        base = _baseline(study)
    if base is None:
        return DataResult(done=False, failed=True, lines=[
            "the baseline did not complete: nothing to judge the data by"])
    evidence = data_bound_evidence(base)
    if evidence is None:
        return DataResult(done=True, data_bound=False, baseline=base.number, lines=[
            f"the baseline (trial #{base.number}) is not data-bound: {_pipeline(base)}; the "
            "data knobs are searched with the rest"])
    head = f"the baseline (trial #{base.number}) is data-bound: it {evidence[0]}"
    changes = [p for p in context.space.neighbours(first=DATA_KNOBS)
               if _data_change(p, context.space.baseline)]
    if not changes:
        return DataResult(done=True, data_bound=True, baseline=base.number, lines=[
            head, "the search space has no data knobs to try: add data.num_workers, "
            "data.multiprocessing, data.prefetch under search.knobs (search=data has them)"])
    seen = [r.params for r in load_records(study)]
    todo = [p for p in changes if p not in seen]
    outcome = sweep_until(count_launches(study) + len(todo)) if todo else None
    if outcome is not None and outcome.exit_code != 0:
        return DataResult(done=False, failed=True,
                          lines=[head, outcome.message.splitlines()[0]])
    records = load_records(study)
    annotate(records, context.prior_cv)  # each trial's one gain over the baseline
    tried = _tried(records, changes, base)
    return DataResult(done=True, data_bound=True, baseline=base.number,
                      trials=[t.trial for t in tried], lines=[head, *_summary(tried, base)])


def _baseline(study) -> TrialRecord | None:
    base = baseline(load_records(study))
    return base if base is not None and base.ok else None


def _data_change(point: dict, baseline: dict) -> str | None:
    """The data knob this neighbour of ``baseline`` changes, or None (it changes another)."""
    return next((p for p in DATA_KNOBS if p in point and point[p] != baseline[p]), None)


def _pipeline(record: TrialRecord) -> str:
    perf = record.perf
    parts = [f"data wait {100 * (record.data_wait_share or 0.0):.1f} % of its step time"]
    if perf.pipeline_samples_per_s and perf.compute_samples_per_s:
        parts.append(f"its pipeline alone delivers {perf.pipeline_samples_per_s:,.0f} "
                     f"samples/s, its step alone consumes {perf.compute_samples_per_s:,.0f} "
                     "samples/s")
    return ", ".join(parts)


def _tried(records: list[TrialRecord], changes: list[dict], base: TrialRecord) -> list[Tried]:
    out = []
    for point in changes:
        record = next((r for r in records if r.params == point and r.number != base.number),
                      None)
        if record is None:
            continue
        knob = next(k for k in point if point[k] != base.params.get(k))
        out.append(Tried(trial=record.number, change=f"{knob}={format_value(point[knob])}",
                         outcome=record.reason_text,
                         gain=record.vs_baseline if record.ok else None))
    return out


def _summary(tried: list[Tried], base: TrialRecord) -> list[str]:
    lines = [f"trial #{t.trial}: {t.change}: "
             + (f"{t.gain.text()} over the baseline" if t.gain is not None
                else t.outcome) for t in tried]
    best = max((t for t in tried if t.gain is not None and t.gain.better),
               key=lambda t: t.gain.ratio, default=None)
    if best is not None:
        lines.append(f"best data change: {best.change} (trial #{best.trial}, "
                     f"{best.gain.text()})")
    else:
        lines.append(f"no data change was separably faster than the baseline: the pipeline "
                     f"needs {CHEAPER_PREPROCESSING}, not more workers")
    return lines
