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
    if options.trial is not None:
        return named_trial(study, records, options.trial), f"trial {options.trial} as requested"
    chosen = selection.export_verdict(records, options, prior_cv=prior_cv, budget_gib=budget_gib)
    if chosen.pick is None:
        raise ConfigError(f"study {study.study_name!r} has no complete trial within the memory "
                          f"budget (headroom {options.min_headroom_gib:g} GiB): run the sweep "
                          "longer or lower export.min_headroom_gib")
    return chosen.pick, chosen.why


def completed(record: TrialRecord, by_number: dict[int, TrialRecord]) -> TrialRecord | None:
    """The measured run that ``record`` stands for (a reused trial's source), or None: only a
    trial that completed has a measured configuration to export or soak."""
    if record.reused_from is not None:
        record = by_number.get(record.reused_from, record)
    return record if record.ok else None


def named_trial(study: optuna.Study, records: list[TrialRecord], number: int, *,
                setting: str = "export.trial", verb: str = "exported") -> TrialRecord:
    """The record ``setting=number`` names; ConfigError naming why it cannot be ``verb``
    (no such trial, or how it ended) and the trials that can."""
    by_number = {r.number: r for r in records}
    record = by_number.get(number)
    chosen = completed(record, by_number) if record is not None else None
    if chosen is not None:
        return chosen
    ok = [r.number for r in records if completed(r, by_number) is not None]
    shown = ", ".join(map(str, ok[:20])) + (f" ... ({len(ok)} in all)" if len(ok) > 20 else "")
    can = (f"trials that can be {verb}: {shown} (or leave {setting} unset for the study's "
           "pick)" if ok else "no trial of the study completed: run the sweep first")
    if record is None:
        raise ConfigError(f"{setting}={number}: no such trial in study "
                          f"{study.study_name!r}; {can}")
    how = f"{record.reason_text} ({record.state.lower()}"
    how += f": {record.reason.label})" if record.reason is not None else ")"
    detail = record.detail.strip().splitlines()[0][:200] if record.detail.strip() else ""
    if detail.lower() in how.lower():  # "pruned" again after "(pruned: ...)"
        detail = ""
    raise ConfigError(f"{setting}={number}: trial {number} ended {how}"
                      + (f"; {detail}" if detail else "") + ", it did not complete and has "
                      f"no measured configuration; {can}")


def study_verdict(records: list[TrialRecord], composed: DictConfig) -> selection.Verdict:
    """Export's verdict under the composed configuration's memory budget and noise prior:
    the one answer the sweep's summary, ``confirm``, ``report``, ``export`` and ``soak``
    print, so that they name the same trial with the same figure."""
    cfg = to_trial_config(composed)
    return selection.export_verdict(records, OmegaConf.to_object(composed.export),
                                    prior_cv=cfg.hardware.cost.run_to_run_cv,
                                    budget_gib=memory_budget_gib(cfg))
