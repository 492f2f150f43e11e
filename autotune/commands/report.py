"""``python -m autotune report``: tables, plots and a diagnosis of a study, as files.

    python -m autotune report                                  # the default study
    python -m autotune report sweep.study=mine workload=gpt_tiny
    python -m autotune report report.out=/tmp/report           # somewhere else

Writes into ``report.out`` (default ``<runs_dir>/<study>/report``): experiments.csv,
experiments.md, ablation.md, failures.md, diagnosis.md, prediction.md, history.png,
memory_vs_throughput.png, importance.png, knob_effects.png, prediction.png,
where_the_time_goes.png (when the study has a profile), index.md and index.html.
It only reads the study; it never changes it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.plan import fits
from autotune.presentation.findings import to_markdown
from autotune.presentation.invocation import autotune_command
from autotune.profiling.profile import stored_profiles
from autotune.report import index, plots, prediction, stages, tables, where_time_goes
from autotune.report.diagnosis import Finding, diagnose
from autotune.settings import StopRules, SweepConfig, SweepSettings
from autotune.study import selection
from autotune.study.layout import StudyLayout
from autotune.study.records import TrialRecord, load_records
from autotune.study.schema.soak import last_soak, soak_of
from autotune.study.schema.stages import StageResult
from autotune.study.schema.stages import stage_results as stored_stage_results
from autotune.study.selection import baseline, export_verdict
from autotune.study.storage import STOP_RULES, load_existing, redact, storage_url
from trials.contract.schema import (
    ConfigError,
    CostPriors,
    TrialConfig,
    memory_budget_gib,
    to_trial_config,
)

__all__ = ["Finding", "diagnose", "run_report", "write_report"]


def config_values(cfg: TrialConfig, stop: StopRules) -> dict[str, Any]:
    """The values trials used where their params do not say (for the diagnosis)."""
    return {
        "precision": cfg.precision.name, "train.micro_batches": cfg.train.micro_batches,
        "train.global_batch": cfg.train.global_batch, "train.lr": cfg.train.lr,
        "train.clip_norm": cfg.train.clip_norm, "train.recompute": cfg.train.recompute.value,
        "data.num_workers": cfg.data.num_workers, "data.prefetch": cfg.data.prefetch,
        "hardware.supports.bf16": cfg.hardware.supports.get("bf16"),
        "hardware.cost.run_to_run_cv": cfg.hardware.cost.run_to_run_cv,
        "sweep.stop.compile_timeout_s": stop.compile_timeout_s,
        "sweep.stop.step_timeout_s": stop.step_timeout_s,
        "sweep.stop.wall_timeout_s": stop.wall_timeout_s,
    }


def stop_rules_ran(study, default: StopRules) -> StopRules:
    """The stop rules the trials ran under (stored by the sweep; keys this version does
    not know are left out), else ``default``."""
    stored = study.user_attrs.get(STOP_RULES) or {}
    known = {f.name for f in dataclasses.fields(StopRules)}
    return OmegaConf.to_object(OmegaConf.merge(
        OmegaConf.structured(default), {k: v for k, v in stored.items() if k in known}))


def ran_with(records: list[TrialRecord], composed: DictConfig) -> TrialConfig:
    """The baseline trial's own config where it exists (what ran), else the composed one."""
    base = baseline(records)
    ran = base.config() if base is not None else None
    return ran if ran is not None else to_trial_config(composed)


def write_report(records: list[TrialRecord], out: Path, *, summary: index.Summary,
                 budget_gib: float | None, config: dict[str, Any],
                 profiles: dict[int, dict] | None = None,
                 stage_results: dict[str, StageResult] | None = None,
                 soak: str = "", fit: str | None = None) -> list[Finding]:
    """Write every report file into ``out`` (created); returns the diagnosis findings.

    ``profiles``: the study's stored profiles (autotune/profiling), by trial number;
    ``stage_results``: what each stage of ``tune`` found (autotune/stages); ``soak``: the
    markdown of the study's soak (autotune/commands/soak.py), if any; ``fit``: the source of
    the study's cost-model fit (autotune/plan/fits.py), None for a user workload.
    """
    out.mkdir(parents=True, exist_ok=True)
    table = tables.experiments(records)
    table.to_csv(out / "experiments.csv", index=False)
    (out / "experiments.md").write_text(
        f"# Experiments: {summary.study}\n\nKnobs: {tables.knob_legend(records) or 'none'}.\n\n"
        + tables.markdown_table(table))
    cv = float(config.get("hardware.cost.run_to_run_cv", CostPriors.run_to_run_cv))
    (out / "ablation.md").write_text(tables.ablation_markdown(records, cv=cv))
    (out / "failures.md").write_text(tables.failures_markdown(records))
    findings = diagnose(records, budget_gib=budget_gib, config=config,
                        study_verdict=summary.verdict)
    time_goes = where_time_goes.section(records, profiles or {}, summary.verdict.pick, out)
    findings += time_goes.findings
    (out / "diagnosis.md").write_text(to_markdown(findings))
    plots.history(records, out / "history.png", budget_gib=budget_gib)
    plots.memory_vs_throughput(records, out / "memory_vs_throughput.png", budget_gib=budget_gib)
    plots.importance(records, out / "importance.png")
    plots.knob_effects(records, out / "knob_effects.png", cv=cv)
    prediction.write(records, out, fit=fit)
    extra = stages.markdown(stage_results or {}) + soak.splitlines()
    (out / "index.md").write_text(index.render_markdown(summary, records, findings, time_goes,
                                                        extra))
    (out / "index.html").write_text(index.render_html(summary, records, findings, out,
                                                      time_goes, extra))
    return findings


def soak_markdown(study, out: Path, pick: int | None = None) -> str:
    """The pick's soak as a section, else the latest soak's, its figure copied next to the
    report; a soak of another trial than the ``pick`` says so (the pick changes after
    ``confirm``)."""
    import shutil

    from autotune.soak.report import soak_section

    soak = (soak_of(study, pick) if pick is not None else None) or last_soak(study)
    if soak is None or soak.trial is None:
        return ""
    plot = Path(soak.plot)
    if soak.plot and plot.is_file():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(plot, out / SOAK_FIGURE)
    section = soak_section(study, soak.trial,
                           plot=SOAK_FIGURE if soak.plot and plot.is_file() else None)
    if section and pick is not None and pick != soak.trial:
        section += (f"\nThis soak ran trial #{soak.trial}, not the pick (trial #{pick}): "
                    f"`{autotune_command('soak')}` soaks the pick.\n")
    return section


SOAK_FIGURE = "soak.png"


def run_report(composed: DictConfig, console: Console, config: SweepConfig) -> int:
    """Entry point of ``python -m autotune report``; a missing study raises ConfigError."""
    settings = config.sweep
    assert isinstance(settings, SweepSettings)
    study = load_existing(settings)
    records = load_records(study, layout=StudyLayout.of(settings))
    cfg = ran_with(records, composed)
    selection.annotate(records, cfg.hardware.cost.run_to_run_cv)
    stop = stop_rules_ran(study, settings.stop)
    budget = memory_budget_gib(cfg)
    out = Path(composed.report.out) if composed.report.out else StudyLayout.of(settings).report
    # The one answer to "which trial is best", under export's options: the summary, the
    # diagnosis, export and soak all name the same trials.
    study_verdict = export_verdict(records, config.export,
                                prior_cv=cfg.hardware.cost.run_to_run_cv, budget_gib=budget)
    summary = index.summarise(records, study=settings.study,
                              storage=redact(storage_url(settings)),
                              n_objectives=len(study.directions), budget_gib=budget,
                              verdict=study_verdict)
    try:
        write_report(records, out, summary=summary, budget_gib=budget,
                     config=config_values(cfg, stop), profiles=stored_profiles(study),
                     stage_results=stored_stage_results(study),
                     soak=soak_markdown(study, out, study_verdict.pick.number
                                        if study_verdict.pick else None),
                     fit=None if cfg.workload.entry
                     else fits.study_model(study, cfg.hardware).constants.source)
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {out} ({exc.strerror or exc}): "
                          "choose a writable report.out=PATH") from exc
    for line in summary.lines():
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"report: {out.resolve() / 'index.md'}", markup=False, soft_wrap=True)
    return 0


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_report(composed, console, config)
