"""The sweep: ask -> filter -> claim -> launch -> watch -> race -> tell, until the launch
budget is spent; then the finalists within noise of the best are raced.

    context = SweepContext.build(composed, validate_settings(composed), overrides)
    outcome = Sweep(context, console).run()

The loop is an outline over the pieces that own each concern: the context
(autotune/sweep_context.py: the checked space, runner, cost model, study layout and
storage), one proposal's life (autotune/proposal.py: filter, claim, launch, follow,
race, score, decide), the dispatcher for trials side by side
(autotune/running/dispatch.py), and the study's budget and stop rules, which say how
the sweep ends (autotune/study/sweep_end.py).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna
from rich.console import Console

from autotune.profiling.winner import profile_winner
from autotune.progress import SweepProgress
from autotune.proposal import Proposals
from autotune.report import leaderboard
from autotune.running.devices import UNPLACED
from autotune.running.dispatch import Dispatcher, Settled, device_pool
from autotune.running.runner import reap_lost
from autotune.search.proposals import sampler, seed_baseline
from autotune.search.racing import final_race
from autotune.study import budget, futility, reaping, selection
from autotune.study import records as R
from autotune.study import stage_results as stages
from autotune.study import storage as S
from autotune.study.choice import study_verdict
from autotune.study.claims import task_lock
from autotune.study.story import pick_sentence
from autotune.study.sweep_end import EndKind, SweepEnd, SweepOutcome
from autotune.sweep_context import SweepContext
from trials.contract.outcomes import Outcome

__all__ = ["MAX_IDLE_PROPOSALS", "Sweep", "SweepOutcome"]

#: Proposals in a row that launch nothing (duplicates, rejections) before the sweep gives up.
MAX_IDLE_PROPOSALS = 200


class Sweep:
    """The sweep loop over a checked :class:`SweepContext`."""

    def __init__(self, context: SweepContext, console: Console, *,
                 observe: Callable[[optuna.Study, Settled], None] | None = None) -> None:
        """``observe`` sees every settled proposal of a one-at-a-time sweep (a benchmark's
        timeline)."""
        self.context = context
        self.console = console
        self.observe = observe

    def run(self, *, limit: int | None = None) -> SweepOutcome:
        """The sweep, until its launch budget is spent. ``limit``: a tuning stage's part
        of it (``tune``'s data stage): it ends once the study has launched this many
        trials, proposes the baseline's one-knob changes first (a data-bound baseline's
        data knobs before the rest), and leaves the leaderboard, the winner and its
        profile to the whole sweep."""
        if limit is None:
            return self._sweep(self.context, final=True)
        return self._sweep(self.context.limited(limit), final=False)

    # -- outline --------------------------------------------------------------------------
    def _sweep(self, context: SweepContext, *, final: bool) -> SweepOutcome:
        study = context.open_study()
        ruled_out = stages.ruled_out(study)
        self._resume(context, study)
        progress = self._progress(context, study)
        try:
            proposals = Proposals(context, study, progress, ruled_out=ruled_out)
            end = self._loop(proposals)
            if final and end.kind is EndKind.DONE:
                proposals.settle_unlaunchable()
            if final and not end.failed:
                self._final_race(proposals)
        finally:
            progress.close()
            context.reserve.release()
        records = R.load_records(study)
        if not end.failed:
            end = futility.nothing_completed(records) or end
        if final:
            self._summary(context, study, records, end)
        else:
            self.console.print(end.message, highlight=False, soft_wrap=True, markup=False)
        return SweepOutcome(end.exit_code, end.message, study)

    def _resume(self, context: SweepContext, study: optuna.Study) -> None:
        """Take over what a stopped orchestrator left running; seed the baseline; install
        the sampler."""
        reaped = reap_lost(study, context.settings)
        if reaped:
            self.console.print(f"reaped {len(reaped)} trial(s) left RUNNING by a stopped "
                               f"orchestrator: {reaped}; their configurations are re-queued")
        seed_baseline(study, context.space)
        if context.model is not None:
            # Without a peak FLOP/s the model predicts memory only: it proposes no trial
            # until it has one, and the sweep says why (its first launches were the
            # sampler's without a word).
            blind = context.model.peak_problem(context.base.precision.dtype)
            self.console.print(f"cost model: {context.model.constants.source}"
                               + (f"; until it has a peak FLOP/s it predicts memory only and "
                                  f"proposes no trial: {blind}" if blind else ""),
                               highlight=False, soft_wrap=True, markup=False)
        study.sampler = sampler(study, context.settings, context.space)

    def _progress(self, context: SweepContext, study: optuna.Study) -> SweepProgress:
        done, total = budget.count_launches(study), context.settings.n_trials
        if done:
            self.console.print(f"resuming study {context.settings.study}: {done}/{total} "
                               "launched")
        progress = SweepProgress(total, min(done, total), enabled=context.settings.progress,
                                 console=self.console)
        context.storage.outage.note = progress.note  # "storage lost" / "back": one line each
        progress.unit = R.unit_of(R.load_records(study))  # a resume's reused trials too
        return progress

    def _summary(self, context: SweepContext, study: optuna.Study,
                 records: list[R.TrialRecord], end: SweepEnd) -> None:
        """The leaderboard, the one winner, how the sweep ended; the winner's profile."""
        level = selection.annotate(records, context.prior_cv)
        self.console.print(leaderboard.render(records, noise_note=leaderboard.noise_line(level)),
                           highlight=False, soft_wrap=True)
        # The one winner: what export and soak take, in the words report and confirm use.
        verdict = study_verdict(records, context.composed)
        self.console.print(pick_sentence(verdict, records), highlight=False, soft_wrap=True,
                           markup=False)
        settings = context.settings
        self.console.print(f"{end.message}\nstudy: {S.redact(S.storage_url(settings))} "
                           f"(name {settings.study}); runs: {context.layout.root}",
                           highlight=False, soft_wrap=True)
        if not end.failed and context.real_trials:
            waiting = ("profiling the winner: another worker on this study is profiling it; "
                       "waiting for its result")
            with task_lock(study, "profile-winner",
                           on_wait=lambda: self.console.print(waiting, markup=False)):
                profile_winner(study, records, verdict.pick, settings, context.config.profile,
                               self.console, context.runner)

    def _final_race(self, proposals: Proposals) -> None:
        """Once the budget is spent: the best and the finalists within noise of it, raced
        until one is separably fastest (autotune/search/racing.py), so that the pick the
        leaderboard names does not rest on one lucky run."""
        context = proposals.context
        if context.multi_objective:  # no single best to race for
            return
        race = context.settings.race
        # Workers on one shared study race once: the others wait, then find it run.
        waiting = ("final race: another worker on this study is running it; waiting for "
                   "its result")
        with task_lock(proposals.study, "final-race",
                       on_wait=lambda: proposals.progress.note(waiting)):
            final_race(proposals.study, R.load_records(proposals.study),
                       finalists=race.finalists, rounds=race.final_rounds,
                       max_runs=context.settings.n_trials, budget_gib=context.budget_gib,
                       prior_cv=context.prior_cv, layout=context.layout,
                       measure=proposals.measure, note=proposals.progress.note,
                       tag=str(context.settings.n_trials))

    # -- the loop -------------------------------------------------------------------------
    def _end(self, proposals: Proposals, idle: int) -> SweepEnd | None:
        """Why the sweep ends before the next proposal, or None."""
        context = proposals.context
        return budget.end_verdict(proposals.study, idle, context.settings, context.space.size,
                                  context.layout.root, max_idle=MAX_IDLE_PROPOSALS)

    def _loop(self, proposals: Proposals) -> SweepEnd:
        if proposals.settings.parallel_trials > 1:
            return self._loop_concurrent(proposals)
        study, checks, idle = proposals.study, proposals.checks, 0
        while (end := self._end(proposals, idle)) is None:
            if checks.due():  # before asking: a claimed trial would wait without a heartbeat
                checks.check(study, R.load_records(study))
            ready = proposals.prepare()
            settled = ready if isinstance(ready, Settled) else proposals.run(ready, UNPLACED)
            if settled.launched:
                checks.launched()
            if self.observe is not None:
                self.observe(study, settled)
            if settled.stop:
                return settled.stop
            idle = 0 if settled.launched else idle + 1
        return end

    def _loop_concurrent(self, proposals: Proposals) -> SweepEnd:
        """``sweep.parallel_trials`` trials in flight, each on devices of its own."""
        settings, note = proposals.settings, proposals.progress.note

        def stopped_by(exc: BaseException) -> None:
            proposals.stopped_by = exc

        dispatcher = Dispatcher(
            device_pool(settings, proposals.context.base.hardware, note),
            settings.parallel_trials, prepare=proposals.prepare, run=proposals.run,
            verdict=lambda idle: self._end(proposals, idle),
            release=lambda ready: reaping.requeue(
                proposals.study, ready.trial, Outcome.INTERRUPTED,
                "the sweep stopped before this proposal started; re-queued"),
            stopping=proposals.stopping, on_stop=stopped_by)
        return dispatcher.loop()
