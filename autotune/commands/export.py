"""``python -m autotune export``: the chosen trial as a production job (job.yaml,
launch.sh, env.sh, requirements.txt, src/ with SHA256SUMS, job.sbatch, mindformers.yaml,
mindformers_train.yaml, provenance.json, CHANGES.md, README.md, soak.png), written
atomically into ``export.out``: a directory that runs wherever it is copied."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig
from rich.console import Console

from autotune.export.atomic import recover, write_atomically
from autotune.export.carry import carry
from autotune.export.changes import describe_changes
from autotune.export.environment import env_script, requirement_files
from autotune.export.job import (
    SOAK_FIGURE,
    export_readme,
    headroom_note,
    job_nodes,
    job_yaml,
    launch_script,
    mindformers_skipped,
    predicted_headroom,
    production_config,
    provenance,
    sbatch_script,
    stability_note,
)
from autotune.export.mindformers import changes_section, export_mindformers
from autotune.export.mindformers_train import (
    TRAIN_README,
    export_train_config,
    train_changes_section,
)
from autotune.plan import fits
from autotune.settings import ExportSettings, SweepConfig
from autotune.study import selection, story
from autotune.study import storage as S
from autotune.study.choice import choose_trial
from autotune.study.layout import StudyLayout
from autotune.study.records import load_records
from trials.contract.schema import (
    ConfigError,
    TrialConfig,
    memory_budget_gib,
    to_trial_config,
)


def mindformers_files(job: TrialConfig, options: ExportSettings) -> tuple[dict, str, str]:
    """mindformers.yaml and mindformers_train.yaml (none for a model of the user's own),
    their CHANGES.md sections and the README's part on them."""
    skipped = mindformers_skipped(job)
    if skipped and options.mindformers_base:
        raise ConfigError(f"export.mindformers_base={options.mindformers_base}: workload "
                          f"{job.workload.name} is not a MindFormers model, so there is "
                          "nothing to merge into a MindFormers config; drop the option")
    if skipped:
        return {}, "\n## MindFormers\n\n" + skipped + "\n", ""
    mindformers = export_mindformers(job, base=options.mindformers_base,
                                     style=options.mindformers_style,
                                     overrides=options.mindformers_overrides,
                                     transfer=options.mindformers_transfer)
    train_config = export_train_config(job, base=options.mindformers_base,
                                       transfer=options.mindformers_transfer)
    return ({"mindformers.yaml": mindformers.yaml(),
             "mindformers_train.yaml": train_config.yaml()},
            changes_section(mindformers) + train_changes_section(train_config, job),
            TRAIN_README)


def run_export(composed: DictConfig, console: Console, config: SweepConfig) -> int:
    settings, options = config.sweep, config.export
    out = Path(options.out) if options.out else StudyLayout.of(settings).export
    # An export killed mid-way first: its previous export back in place, its debris gone.
    for line in recover(out):
        console.print(line, highlight=False, soft_wrap=True)
    if out.exists() and any(out.iterdir()) and not options.overwrite:
        raise ConfigError(f"{out} is not empty: choose another export.out=DIR or set "
                          "export.overwrite=true")
    study = S.load_existing(settings)
    records = load_records(study, layout=StudyLayout.of(settings))
    base_cfg = to_trial_config(composed)
    prior_cv, budget_gib = base_cfg.hardware.cost.run_to_run_cv, memory_budget_gib(base_cfg)
    chosen, _ = choose_trial(study, records, options, prior_cv=prior_cv,
                               budget_gib=budget_gib)
    # What the summary, confirm and the report say of the pick, word for word.
    sentence = story.requested_sentence(chosen) if options.trial is not None else \
        story.pick_sentence(selection.export_verdict(records, options, prior_cv=prior_cv,
                                                     budget_gib=budget_gib), records)
    job = production_config(chosen, options)
    mindformers, mindformers_note, mindformers_readme = mindformers_files(job, options)
    carried = carry(job)
    baseline = selection.baseline(records)
    headroom = predicted_headroom(job, fits.study_model(study, job.hardware))
    files: dict[str, str | bytes] = {
        "job.yaml": job_yaml(carried.job_config(job)),
        "launch.sh": launch_script(job, carried.modules),
        "env.sh": env_script(job),
        **requirement_files(job),
        "job.sbatch": sbatch_script(job, study=settings.study, trial=chosen.number),
        **mindformers,
    }
    soak, figure = stability_note(study, chosen.number)
    files.update({
        "provenance.json": json.dumps({**provenance(study, settings, chosen, sentence,
                                                    source=carried.provenance),
                                       "predicted_memory": headroom}, indent=2,
                                      default=str) + "\n",
        "CHANGES.md": describe_changes(chosen, baseline, job, records)
        + headroom_note(headroom, chosen.simulated) + mindformers_note,
        "README.md": export_readme(job, trial=chosen.number, study=settings.study,
                               throughput=story.figure(chosen), why=sentence)
        + mindformers_readme  # a bullet of the file list, which the soak section follows
        + soak,
        "SHA256SUMS": carried.sha256sums(),
        **carried.files,
    })
    if figure is not None:
        files[SOAK_FIGURE] = figure
    write_atomically(out, files, overwrite=options.overwrite)
    nodes = job_nodes(job)
    where = f" on each of its {nodes} nodes" if nodes > 1 else ""
    console.print(f"{sentence}\nexported trial {chosen.number} to {out}\n"
                  f"run it{where}: bash {out / 'launch.sh'}\n"
                  f"or on SLURM: cd {out} && sbatch job.sbatch", highlight=False,
                  soft_wrap=True)
    return 0


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_export(composed, console, config)
