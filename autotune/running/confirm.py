"""Run ``confirm``: re-measure the finalists in interleaved rounds, store each run as it
finishes, then their verdicts (autotune/study/confirmation.py) on the study."""

from __future__ import annotations

from omegaconf import DictConfig
from rich.console import Console

from autotune.running.preflight import check_configs
from autotune.running.repeat import rerun
from autotune.running.runner import runner_for
from autotune.settings import SweepConfig, SweepSettings
from autotune.study import confirmation as C
from autotune.study import selection
from autotune.study import storage as S
from autotune.study.choice import study_verdict
from autotune.study.confirm_progress import ConfirmProgress
from autotune.study.layout import StudyLayout
from autotune.study.records import Repeat, TrialRecord, load_records
from autotune.study.schema.confirm import store_confirm_verdicts
from autotune.study.story import pick_sentence
from trials.contract.schema import ConfigError, to_trial_config


def run_confirm(composed: DictConfig, console: Console, config: SweepConfig) -> int:
    settings, options = config.sweep, config.confirm
    study = S.load_existing(settings)
    layout = StudyLayout.of(settings)
    records = load_records(study, layout=layout)
    base = selection.baseline(records)
    # Each trial's gain in the sweep, so that one already separably slower than the
    # baseline is a finalist only after the rest.
    selection.annotate(records, to_trial_config(composed).hardware.cost.run_to_run_cv)
    chosen = C.confirm_finalists(records, base, options.top_k)
    if not chosen:
        raise ConfigError(f"study {settings.study!r} has no complete trial to confirm: "
                          "run the sweep first")
    check_configs([r.run_dir.read_config() for r in chosen
                   if r.run_dir is not None and r.run_dir.has_config()], settings)
    orders = C.round_orders(chosen, options.repeats, seed=settings.seed)
    stored_runs, progress = measure_rounds(study, chosen, orders, base, settings, console)
    runs: dict[int, list[float | None]] = {
        n: [r.performance.tokens_per_s if r else None for r in kept]
        for n, kept in stored_runs.items()}
    #: Whether each run was measured under load, round by round.
    loaded = {n: [bool(r) and r.under_load for r in kept] for n, kept in stored_runs.items()}
    summary = C.verdicts(chosen, runs, base, loaded)
    store_confirm_verdicts(study, summary, [[r.number for r in order] for order in orders])
    progress.finish()

    def say(text: str) -> None:
        console.print(text, highlight=False, soft_wrap=True, markup=False)

    say(C.render(chosen, summary, runs, base, loaded))
    under_load = sum(flag for flags in loaded.values() for flag in flags)
    if under_load:
        say(f"{under_load} run(s) measured under load (other processes above "
            "sweep.contention_cores): a round counts in a paired test only where both of "
            "its runs were measured alike (both quiet, or both under load)")
    for note in (C.too_few_rounds(summary), C.paired_against_medians(summary),
                 C.speed_change(base, summary.get(base.number) if base is not None else None)):
        if note:
            say(note)
    # The one winner, now that the confirmed figures are stored: what export and soak take.
    records = load_records(study, layout=layout)
    say(pick_sentence(study_verdict(records, composed), records))
    return 0


def measure_rounds(study, chosen: list[TrialRecord], orders: list[list[TrialRecord]],
                   base: TrialRecord | None, settings: SweepSettings, console: Console
                   ) -> tuple[dict[int, list[Repeat | None]], ConfirmProgress]:
    """Run every round (what a stopped confirm of the same plan finished is kept, not run
    again); each finalist's stored run of each round (None: it failed), and the progress."""
    layout, runner = StudyLayout.of(settings), runner_for(settings)
    progress = ConfirmProgress.open(study, trials=[r.number for r in chosen],
                                    orders=[[r.number for r in order] for order in orders])
    total = len(orders) * len(chosen)
    kept = sum(progress.done(r.number, rep) for rep in range(len(orders)) for r in chosen)
    if progress.resumed and kept:
        console.print(f"resuming the stopped confirm: {kept} of {total} runs finished before "
                      "the stop and are kept", highlight=False)
    done = 0
    for rep, order in enumerate(orders):
        console.print(f"round {rep + 1}: trials {', '.join(str(r.number) for r in order)}",
                      highlight=False)
        for r in order:
            done += 1
            if progress.done(r.number, rep):
                continue
            role = " (baseline)" if base is not None and r.number == base.number else ""
            console.print(f"confirm {done}/{total}: trial {r.number}{role} round {rep + 1}",
                          highlight=False)
            # Stored as it finishes: a stop after it keeps it, and the rerun skips it.
            progress.store(r.number, rep, rerun(runner, r.run_dir, layout.confirm(r.number, rep),
                                                settings, name=f"confirm/{r.number}"))
    return {r.number: progress.runs(r.number) for r in chosen}, progress
