"""Which trial to export: a named one, else the study's pick (:func:`selection.verdict`:
the best confirmed where ``confirm`` ran, else the fastest, for Pareto studies with enough
memory headroom; then the simplest configuration the fastest is not separable from).
The report's diagnosis and the soak name the same trial, because they ask the same
function."""

from __future__ import annotations

import optuna
from omegaconf import DictConfig, OmegaConf

from autotune.settings import ExportSettings
from autotune.study import selection
from autotune.study.records import TrialRecord
from trials.contract.schema import ConfigError, memory_budget_gib, to_trial_config


def choose_trial(study: optuna.Study, records: list[TrialRecord],
                 options: ExportSettings, *, prior_cv: float,
                 budget_gib: float | None = None) -> tuple[TrialRecord, str]:
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
    chosen = selection.export_verdict(records, options, prior_cv=prior_cv, budget_gib=budget_gib)
    if chosen.pick is None:
        raise ConfigError(f"study {study.study_name!r} has no complete trial within the memory "
                          f"budget (headroom {options.min_headroom_gib:g} GiB): run the sweep "
                          "longer or lower export.min_headroom_gib")
    return chosen.pick, chosen.why


def study_verdict(records: list[TrialRecord], composed: DictConfig) -> selection.Verdict:
    """Export's verdict under the composed configuration's memory budget and noise prior:
    the one answer the sweep's summary, ``confirm``, ``report``, ``export`` and ``soak``
    print, so that they name the same trial with the same figure."""
    cfg = to_trial_config(composed)
    return selection.export_verdict(records, OmegaConf.to_object(composed.export),
                                    prior_cv=cfg.hardware.cost.run_to_run_cv,
                                    budget_gib=memory_budget_gib(cfg))
