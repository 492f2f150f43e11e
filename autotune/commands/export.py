"""``python -m autotune export``: the chosen trial as a production job (job.yaml,
launch.sh, job.sbatch, mindformers.yaml, provenance.json, CHANGES.md, README.md),
written atomically into ``export.out``."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.export.atomic import recover, write_atomically
from autotune.export.changes import describe_changes
from autotune.export.job import (
    EXPORT_README,
    headroom_note,
    job_nodes,
    launch_script,
    predicted_headroom,
    production_config,
    provenance,
    sbatch_script,
    stability_note,
)
from autotune.export.mindformers import changes_section, export_mindformers
from autotune.plan import fits
from autotune.settings import ExportSettings, SweepSettings
from autotune.study import selection
from autotune.study import storage as S
from autotune.study.choice import choose_trial
from autotune.study.records import load_records
from trials.contract.schema import ConfigError, memory_budget_gib, to_trial_config


def run_export(composed: DictConfig, console: Console) -> int:
    settings: SweepSettings = OmegaConf.to_object(composed.sweep)
    options: ExportSettings = OmegaConf.to_object(composed.export)
    out = Path(options.out) if options.out else S.study_dir(settings) / "export"
    # An export killed mid-way first: its previous export back in place, its debris gone.
    for line in recover(out):
        console.print(line, highlight=False, soft_wrap=True)
    if out.exists() and any(out.iterdir()) and not options.overwrite:
        raise ConfigError(f"{out} is not empty: choose another export.out=DIR or set "
                          "export.overwrite=true")
    study = S.load_existing(settings)
    records = load_records(study)
    base_cfg = to_trial_config(composed)
    chosen, why = choose_trial(study, records, options,
                               prior_cv=base_cfg.hardware.cost.run_to_run_cv,
                               budget_gib=memory_budget_gib(base_cfg))
    job = production_config(chosen, options)
    baseline = selection.baseline(records)
    headroom = predicted_headroom(job, fits.study_model(study, job.hardware))
    mindformers = export_mindformers(job, base=options.mindformers_base,
                                     style=options.mindformers_style,
                                     overrides=options.mindformers_overrides)
    files = {
        "job.yaml": OmegaConf.to_yaml(OmegaConf.structured(job)),
        "launch.sh": launch_script(job),
        "job.sbatch": sbatch_script(job, study=settings.study, trial=chosen.number),
        "mindformers.yaml": mindformers.yaml(),
        "provenance.json": json.dumps({**provenance(study, settings, chosen, why),
                                       "predicted_memory": headroom}, indent=2,
                                      default=str) + "\n",
        "CHANGES.md": describe_changes(chosen, baseline, job, records)
        + headroom_note(headroom, chosen.simulated) + changes_section(mindformers),
        "README.md": EXPORT_README.format(trial=chosen.number, study=settings.study,
                                          throughput=f"{chosen.tokens_per_s:,.0f} "
                                                     f"{chosen.rate}")
        + stability_note(study, chosen.number),
    }
    write_atomically(out, files, overwrite=options.overwrite)
    nodes = job_nodes(job)
    where = f" on each of its {nodes} nodes" if nodes > 1 else ""
    console.print(f"exported trial {chosen.number} ({why}) to {out}\n"
                  f"run it{where}: bash {out / 'launch.sh'}\n"
                  f"or on SLURM: cd {out} && sbatch job.sbatch", highlight=False,
                  soft_wrap=True)
    return 0


def run(composed: DictConfig, overrides: list[str], console: Console) -> int:
    return run_export(composed, console)
