"""Which trial to export: a named one, the best confirmed, the best feasible, or for
Pareto studies the fastest with enough memory headroom."""

from __future__ import annotations

import optuna

from autotune.settings import ExportSettings
from autotune.study import selection
from autotune.study.records import TrialRecord
from trials.contract.schema import ConfigError


def choose_trial(study: optuna.Study, records: list[TrialRecord],
                 options: ExportSettings) -> tuple[TrialRecord, str]:
    """(record, why it was chosen). ConfigError when nothing qualifies."""
    by_number = {r.number: r for r in records}
    if options.trial is not None:
        record = by_number.get(options.trial)
        if record is None:
            raise ConfigError(f"export.trial={options.trial}: no such trial in study "
                              f"{study.study_name!r} (0..{len(records) - 1})")
        if record.reused_from is not None:
            record = by_number[record.reused_from]
        return record, f"trial {options.trial} as requested"
    candidates = selection.feasible_records(records, None,
                                            min_headroom_gib=options.min_headroom_gib)
    if not candidates:
        raise ConfigError(f"study {study.study_name!r} has no complete trial within the memory "
                          f"budget (headroom {options.min_headroom_gib:g} GiB): run the sweep "
                          "longer or lower export.min_headroom_gib")
    confirmed = [r for r in candidates if (r.attrs.get("confirm") or {}).get("median")]
    if options.use_confirmed and confirmed:
        best = max(confirmed, key=lambda r: r.attrs["confirm"]["median"])
        return best, (f"best confirmed median {best.attrs['confirm']['median']:,.0f} tok/s over "
                      f"{len(best.attrs['confirm']['tokens_per_s'])} re-runs")
    best = selection.best(records, None, min_headroom_gib=options.min_headroom_gib)
    if options.min_headroom_gib > 0:
        return best, (f"fastest trial with >= {options.min_headroom_gib:g} GiB memory headroom "
                      f"({best.tokens_per_s:,.0f} tok/s)")
    return best, f"best feasible trial ({best.tokens_per_s:,.0f} tok/s)"
