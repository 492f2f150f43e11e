"""``python -m autotune tune``: tune in the method's order, one stage at a time.

    correctness -> memory -> data -> throughput -> stability

1. correctness (autotune/stages/correctness.py): the baseline learns; reduced
   precisions follow its loss curve, or are ruled out for the sweep;
2. memory (autotune/stages/memory.py): which configurations fit, with headroom;
3. data (autotune/stages/data.py): a data-bound baseline has the space's data knobs
   tried first, one at a time;
4. throughput (autotune/stages/throughput.py): the sweep (``python -m autotune
   sweep``), which skips what stage 1 ruled out and goes on from the data stage's trials;
5. stability: ``python -m autotune soak`` of the configuration export would choose.

Each stage's result is stored on the study (``autotune.stages``) and shown by the
report. Running the same command again resumes: finished stages are skipped, the
sweep resumes where it stopped. ``tune.stages`` picks a subset.
"""

from __future__ import annotations

import optuna
from omegaconf import DictConfig
from rich.console import Console

from autotune.presentation.invocation import autotune_command
from autotune.presentation.labels import params_label
from autotune.settings import SweepConfig, TuneSettings
from autotune.stages.correctness import run_correctness
from autotune.stages.data import run_data
from autotune.stages.memory import run_memory
from autotune.stages.throughput import run_throughput
from autotune.stages.verdicts import soak_issues, verdict
from autotune.study import records as R
from autotune.study import stage_results as store
from autotune.study.choice import study_verdict
from autotune.study.schema.soak import SoakVerdict, soak_of
from autotune.study.schema.stages import StageResult, stage_results
from autotune.study.storage import same_study
from autotune.sweep import Sweep
from autotune.sweep_context import SweepContext

#: What ``autotune`` says when it is stopped during ``tune``.
STOPPED = ("the running trial was killed and re-queued; finished stages are kept: run the "
           "same command again to resume")


def run_tune(composed: DictConfig, overrides: list[str], console: Console, *,
             config: SweepConfig) -> int:
    # Checks everything before anything runs.
    context = SweepContext.build(composed, config, overrides)
    sweep = Sweep(context, console)
    study = context.open_study()
    try:
        return _stages(context, sweep, study, composed, config, console)
    finally:  # the disk reserve is the sweep's while it runs: nothing of it outlives tune
        context.reserve.release()


def _stages(context: SweepContext, sweep: Sweep, study, composed: DictConfig,
            config: SweepConfig, console: Console) -> int:
    options: TuneSettings = config.tune
    stored = stage_results(study)
    verdicts = []
    for i, stage in enumerate(options.stages, 1):
        head = f"stage {i}/{len(options.stages)}: {stage}"
        if stage != "throughput" and stage in stored and stored[stage].done:
            console.print(f"{head}: done earlier", markup=False)
            _lines(console, stored[stage].lines)
            verdicts.append(verdict(stage, stored[stage]))
            continue
        console.print(f"{head} ...", markup=False)
        if stage == "correctness":
            result = run_correctness(context, options, console)
        elif stage == "memory":
            result = run_memory(context, options, say=lambda line: _lines(console, [line]))
        elif stage == "data":
            result = run_data(context, lambda n: sweep.run(limit=n))
        elif stage == "throughput":
            result = run_throughput(sweep.run, lambda study: _pick(study, composed))
        else:
            result = _stability(composed, config, study, console)
        store.save(study, stage, result)
        verdicts.append(verdict(stage, result))
        if stage != "stability":  # the soak has printed its own verdicts
            _lines(console, result.lines)
        if result.failed:
            console.print(f"tune stopped at the {stage} stage; fix what it says, then run the "
                          "same command again", markup=False)
            return 1
    console.print("all stages done; the verdicts:", markup=False)
    _lines(console, verdicts)
    console.print(f"details: python -m autotune report {same_study(context.settings)}".rstrip(),
                  markup=False)
    return 0


def _lines(console: Console, lines: list[str]) -> None:
    for line in lines:
        console.print(f"  {line}", markup=False, soft_wrap=True)


def _stability(composed: DictConfig, config: SweepConfig, study, console: Console
               ) -> StageResult:
    """The soak of the trial export would choose; one already run (``python -m autotune
    soak``) of that trial is taken as it is, not run again. Its result, as a stage's."""
    from autotune.commands.soak import run_soak
    from autotune.soak.plan import pick_trial
    from autotune.study.records import load_records

    chosen, _ = pick_trial(study, load_records(study), composed, config.soak)
    soak = soak_of(study, chosen.number)
    if soak is not None and soak.finished:
        console.print(f"  trial {chosen.number} was soaked already: its result is taken "
                      f"({autotune_command('soak')} runs it again)", markup=False)
        _lines(console, soak.verdicts)
        return StageResult(done=True, trial=chosen.number, lines=list(soak.verdicts),
                           issues=soak_issues(soak))
    code = run_soak(composed, console, config)
    soak = soak_of(study, chosen.number) or SoakVerdict()
    lines = soak.verdicts or [f"soak ended with exit code {code}"]
    return StageResult(done=code == 0, failed=code != 0, trial=soak.trial, lines=list(lines),
                       issues=soak_issues(soak))


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_tune(composed, overrides, console, config=config)


def _pick(study: optuna.Study, composed: DictConfig) -> str:
    """The sweep's pick in one line: the trial export takes, its changes, its figure."""
    pick = study_verdict(R.load_records(study), composed).pick
    if pick is None:
        return "no trial to pick"
    return f"pick trial #{pick.number} ({params_label(pick.params)}): {pick.sweep_figure}"
