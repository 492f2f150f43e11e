"""The baseline re-measured while the sweep runs (``sweep.baseline_every=K``), so that every
trial's gain is measured against a baseline run close to it in time.

On a machine whose speed drifts (other jobs come and go) a trial measured an hour after
the baseline is compared with a baseline measured under other conditions; a
re-measurement every K launches gives each trial a neighbour in time
(:func:`autotune.study.selection.nearest_baseline_runs`), and its repeats measure the
study's own run-to-run noise. The decision lives here; the run comes through
``measure`` (the sweep's runner), as racing's do.
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.search.racing import Measure
from autotune.study import records as R
from autotune.study import selection
from autotune.study.confirmation import speed_changed
from autotune.study.layout import StudyLayout
from autotune.study.schema.repeats import BASELINE_CHECK_SOURCE
from trials.contract.performance import Performance
from trials.contract.units import rate


class BaselineChecks:
    def __init__(self, every: int, layout: StudyLayout, measure: Measure,
                 note: Callable[[str], None]) -> None:
        self.every = every
        self.layout = layout
        self.measure = measure
        self.note = note
        self.since = 0  # launches since the baseline was last measured
        self.requested = False

    def launched(self) -> None:
        self.since += 1

    def request(self) -> None:
        """Re-measure before the next launch whatever ``every`` says (a baseline that
        missed its precision target is run again)."""
        self.requested = True

    def request_if_imprecise(self, base: R.TrialRecord | None) -> None:
        """:meth:`request` for a baseline that missed its precision target and has not been
        measured again since: one rule, whether it was measured in this run or before it
        (tune's data stage, a sweep stopped right after it)."""
        if base is not None and base.imprecise and not base.repeat_records:
            self.request()

    def due(self) -> bool:
        """Before the next launch: asked for, or K launches since the baseline was last
        measured."""
        return self.requested or (bool(self.every) and self.since >= self.every)

    def check(self, study: optuna.Study, records: list[R.TrialRecord]) -> Performance | None:
        """Re-measure the baseline now (once), store the run as a repeat of it; what it
        measured, or None (no completed baseline yet, or the run failed)."""
        self.since, self.requested = 0, False
        base = selection.baseline(records)
        if base is None or not base.ok or base.run_dir is None or not base.run_dir.has_config():
            return None
        index = sum(1 for r in base.repeat_records if r.source == BASELINE_CHECK_SOURCE)
        perf = self.measure(base.run_dir, self.layout.baseline_check(base.number, index),
                            f"{study.study_name}/baseline-check")
        if perf is None:
            self.note(f"re-measuring the baseline (trial {base.number}) failed; gains keep "
                      "its earlier runs")
            return None
        R.add_repeats(study, {base.number: [perf]}, BASELINE_CHECK_SOURCE)
        now, first = Performance.from_dict(perf).tokens_per_s, base.perf.tokens_per_s
        ratio = now / first if now and first else None
        moved = speed_changed(ratio)
        self.note(f"baseline (trial {base.number}) re-measured: {now:,.0f} "
                  f"{rate(base.perf.unit, short=True)}"
                  + (f", {ratio:.2f}x its first run" if ratio else "")
                  + ("; the machine's speed changed: the next trials are measured against "
                     "this run" if moved else ""))
        return Performance.from_dict(perf)
