"""The sweep: ask -> filter -> claim -> launch -> watch -> race -> tell, until the launch
budget is spent.

The loop is an outline over the pieces that own each concern: ``search`` (the
space, the filters a proposal meets before launch, racing), ``running`` (the
runner that starts a trial, the follow loop, its stop rules and outcome), ``plan``
(the cost model and its refits), ``study`` (storage, budget, reaping, scoring,
selection).
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState
from rich.console import Console

from autotune.plan import fits
from autotune.plan.costmodel import CostModel
from autotune.plan.learning import Refitter
from autotune.presentation.labels import params_label
from autotune.profiling.winner import profile_winner
from autotune.progress import SweepProgress
from autotune.report import leaderboard
from autotune.running import monitor, preflight, pruning
from autotune.running.conditions import wait_for_quiet
from autotune.running.devices import UNPLACED, Placement
from autotune.running.dispatch import Dispatcher, Ready, Settled, device_pool
from autotune.running.job import Runner
from autotune.running.launch import launch_trial
from autotune.running.repeat import rerun
from autotune.running.runner import reap_lost, runner_for
from autotune.search import feasibility, filters, proposals
from autotune.search.baseline_checks import BaselineChecks
from autotune.search.racing import race
from autotune.search.space import SearchSpace, check_devices, fingerprint_parts
from autotune.settings import Objective, SweepSettings
from autotune.signals import Stopped
from autotune.study import budget, futility, reaping, scoring, selection, twins
from autotune.study import records as R
from autotune.study import stage_results as stages
from autotune.study import storage as S
from autotune.study.artifacts import RunFiles
from autotune.study.choice import study_verdict
from autotune.study.disk import DiskFull, Reserve, check_room, full_is_diskfull
from autotune.study.interruption import interrupt, taken_over
from autotune.study.layout import StudyLayout
from autotune.study.sweep_end import SweepEnd
from autotune.study.view import StudyView
from trials.contract.outcomes import Outcome
from trials.contract.schema import ConfigError, TrialConfig, memory_budget_gib, to_trial_config

#: Proposals in a row that launch nothing (duplicates, rejections) before the sweep gives up.
MAX_IDLE_PROPOSALS = 200


@dataclass
class SweepOutcome:
    exit_code: int
    message: str
    study: optuna.Study | None = None


class Sweep:
    def __init__(self, composed: DictConfig, overrides: list[str], console: Console, *,
                 runner: Runner | None = None, measured: bool = False,
                 observe: Callable[[optuna.Study, Settled], None] | None = None) -> None:
        """``runner`` replaces the one the settings choose (a benchmark's replay);
        ``measured``: its results are real measurements (a replay of recorded runs), so they
        may refit the cost model; ``observe`` sees every settled proposal of a
        one-at-a-time sweep."""
        self.settings: SweepSettings = OmegaConf.to_object(composed.sweep)
        self.profile_options = OmegaConf.to_object(composed.profile)
        self.composed = composed
        self.console = console
        S.check_study_name(self.settings.study)
        self.space = SearchSpace.from_config(OmegaConf.to_object(composed.search), composed,
                                             overrides)
        self.base: TrialConfig = to_trial_config(composed)
        #: Only the real trial program's measurements calibrate, profile and preflight.
        self.real_trials = runner is None and not (self.settings.simulate
                                                   or self.settings.trial_command)
        if self.real_trials:
            preflight.check_reach(self.base, {k.path: k.choices for k in self.space.knobs},
                                  preflight.check_runnable(self.base))
        self.budget_gib = memory_budget_gib(self.base)
        # The cost model of this profile (the study's own fit once the study is open); None
        # for a user workload (no dimensions).
        self.model = (None if self.base.workload.entry
                      else CostModel.for_profile(self.base.hardware))
        if self.settings.simulate and self.model is not None:
            # A simulated step time needs the profile's peak in every dtype of the space.
            problem = next(filter(None, map(self.model.peak_problem,
                                            self.space.dtypes(self.base))), None)
            if problem:
                raise ConfigError(f"sweep.simulate=true needs a step time: {problem}")
        self.multi = self.settings.objective is Objective.pareto
        self.prior_cv = self.base.hardware.cost.run_to_run_cv
        #: ``sweep.pruner``: installed as the study's pruner, asked after each new step.
        self.pruner = pruning.build(self.settings, warmup_steps=self.base.run.warmup_steps)
        self.layout = StudyLayout.of(self.settings)
        self.dir = self.layout.root
        #: Room kept on the study's disk to record a stop when the disk fills.
        self.reserve = Reserve(self.dir)
        #: Knob values an earlier tuning stage ruled out (``tune``: correctness).
        self.ruled_out: dict = {}
        #: Concurrent trials: set when the main thread is told to stop; trial threads see it.
        self._stopping = threading.Event()
        self._stopped_by: BaseException | None = None
        check_devices(self.space, self.base, self.settings)
        _, problem = feasibility.structural_problem(self.space, self.space.baseline)
        if problem:
            raise ConfigError(f"the baseline configuration is impossible: {problem}")
        alone = feasibility.only_the_baseline(self.space)
        if alone:
            name = composed.search.name
            raise ConfigError(
                f"search space {name!r} has nothing to search besides the baseline: {alone}; "
                f"list values that can run under search.knobs in conf/search/{name}.yaml "
                "(or measure the baseline alone: python -m autotune profile)")
        self.runner = runner or runner_for(self.settings)
        self.observe = observe
        #: The baseline's re-measurements (one-at-a-time sweeps; None side by side).
        self.checks: BaselineChecks | None = None
        self.refitter = (Refitter(self.model, self.settings.predict.oom_margin)
                         if self.model is not None and self.settings.predict.refit
                         and (self.real_trials or measured) else None)

    def fingerprint_parts(self) -> dict:
        return fingerprint_parts(self.space, self.base, simulated=self.settings.simulate)

    # -- outline --------------------------------------------------------------------------
    def open_study(self) -> optuna.Study:
        """The study of this space, workload and hardware: created, or loaded to resume.
        A disk that fills while it is created leaves nothing behind."""
        S.check_runs_dir(self.settings)
        new = next((d for d in (self.dir, *self.dir.parents) if d.parent.exists()), None)
        new = None if new is None or new.exists() else new
        try:
            with full_is_diskfull(self.dir):
                self.storage = S.open_storage(self.settings, create=True)
                study = S.load_or_create(self.settings, self.storage, self.fingerprint_parts(),
                                         self.space.distributions())
                self.reserve.hold()
        except DiskFull:
            if new is not None:
                shutil.rmtree(new, ignore_errors=True)
            raise
        # What the report's diagnosis quotes: the stop rules the trials really ran under.
        study.set_user_attr(S.STOP_RULES, OmegaConf.to_container(
            OmegaConf.structured(self.settings.stop)))
        study.pruner = self.pruner
        if self.model is not None:  # the study's own fit, not another study's
            fits.adopt(study, self.model)
        return study

    def run(self, *, limit: int | None = None) -> SweepOutcome:
        """The sweep, until its launch budget is spent. ``limit``: a tuning stage's part
        of it (``tune``'s data stage): it ends once the study has launched this many
        trials, proposes the baseline's one-knob changes first (a data-bound baseline's
        data knobs before the rest), and leaves the leaderboard, the winner and its
        profile to the whole sweep."""
        if limit is None:
            return self._sweep(final=True)
        whole = self.settings
        self.settings = dataclasses.replace(whole, n_trials=min(limit, whole.n_trials),
                                            neighbours=True)
        try:
            return self._sweep(final=False)
        finally:
            self.settings = whole

    def _sweep(self, *, final: bool) -> SweepOutcome:
        study = self.open_study()
        self.ruled_out = stages.ruled_out(study)
        self.filters = self._filters()
        reaped = reap_lost(study, self.settings)
        if reaped:
            self.console.print(f"reaped {len(reaped)} trial(s) left RUNNING by a stopped "
                               f"orchestrator: {reaped}; their configurations are re-queued")
        proposals.seed_baseline(study, self.space)
        if self.model is not None:
            self.console.print(f"cost model: {self.model.constants.source}", highlight=False,
                               soft_wrap=True, markup=False)
        study.sampler = proposals.sampler(study, self.settings, self.space)
        done, total = budget.count_launches(study), self.settings.n_trials
        if done:
            self.console.print(f"resuming study {self.settings.study}: {done}/{total} launched")
        progress = SweepProgress(total, min(done, total), enabled=self.settings.progress,
                                 console=self.console)
        self.storage.outage.note = progress.note  # "storage lost" / "back": one line each
        progress.unit = R.unit_of(R.load_records(study))  # a resume's reused trials too
        try:
            end = self._loop(study, progress)
        finally:
            progress.close()
            self.reserve.release()
        records = R.load_records(study)
        if not end.failed:
            end = futility.nothing_completed(records) or end
        failed, message = end.failed, end.message
        if not final:
            self.console.print(message, highlight=False, soft_wrap=True, markup=False)
            return SweepOutcome(1 if failed else 0, message, study)
        level = selection.annotate(records, self.prior_cv)
        self.console.print(leaderboard.render(records, noise_note=leaderboard.noise_line(level)),
                           highlight=False, soft_wrap=True)
        # The one winner: what export and soak take, as report and confirm name it.
        verdict = study_verdict(records, self.composed)
        for line in verdict.lines():
            self.console.print(line, highlight=False, soft_wrap=True, markup=False)
        self.console.print(f"{message}\nstudy: {S.redact(S.storage_url(self.settings))} "
                           f"(name {self.settings.study}); runs: {self.dir}", highlight=False,
                           soft_wrap=True)
        if not failed and self.real_trials:
            profile_winner(study, records, verdict.pick, self.settings, self.profile_options,
                           self.console, self.runner)
        return SweepOutcome(1 if failed else 0, message, study)

    def _filters(self) -> list[filters.Filter]:
        chain: list[filters.Filter] = [filters.Structural(),
                                       filters.RuledOutByStage(self.ruled_out), filters.Reuse()]
        if self.model is not None:
            chain.append(filters.PredictedOOM(self.model, self.budget_gib,
                                              self.settings.predict))
        return [*chain, filters.OOMDominance()]

    def _verdict(self, study: optuna.Study, idle: int) -> SweepEnd | None:
        """Why the sweep ends before the next proposal, or None."""
        return budget.end_verdict(study, idle, self.settings, self.space.size, self.dir,
                                  max_idle=MAX_IDLE_PROPOSALS)

    def _loop(self, study: optuna.Study, progress: SweepProgress) -> SweepEnd:
        if self.settings.parallel_trials > 1:
            return self._loop_concurrent(study, progress)
        checks = self.checks = BaselineChecks(self.settings.baseline_every, self.layout,
                                              self._measure, progress.note)
        idle = 0
        while (end := self._verdict(study, idle)) is None:
            if checks.due():  # before asking: a claimed trial would wait without a heartbeat
                checks.check(study, R.load_records(study))
            ready = self._prepare(study, progress)
            settled = ready if isinstance(ready, Settled) else \
                self._run(study, ready, progress, UNPLACED)
            if settled.launched:
                checks.launched()
            if self.observe is not None:
                self.observe(study, settled)
            if settled.stop:
                return settled.stop
            idle = 0 if settled.launched else idle + 1
        return end

    def _loop_concurrent(self, study: optuna.Study, progress: SweepProgress) -> SweepEnd:
        """``sweep.parallel_trials`` trials in flight, each on devices of its own."""
        dispatcher = Dispatcher(
            device_pool(self.settings, self.base.hardware, progress.note),
            self.settings.parallel_trials,
            prepare=lambda: self._prepare(study, progress),
            run=lambda ready, placement: self._run(study, ready, progress, placement),
            verdict=lambda idle: self._verdict(study, idle),
            release=lambda ready: reaping.requeue(
                study, ready.trial, Outcome.INTERRUPTED,
                "the sweep stopped before this proposal started; re-queued"),
            stopping=self._stopping, on_stop=lambda exc: setattr(self, "_stopped_by", exc))
        return dispatcher.loop()

    # -- one proposal ---------------------------------------------------------------------
    def _prepare(self, study: optuna.Study, progress: SweepProgress) -> Settled | Ready:
        """Ask for a point and check it: rejected or reused here (Settled), or Ready to run
        with its launch claimed."""
        if self.settings.neighbours:
            proposals.queue_next_neighbour(study, self.space)
        # Seeds past the budget would wait in the study for a run that never comes.
        seeds = min(self.settings.predict.enqueue_best,
                    self.settings.n_trials - budget.count_launches(study))
        if self.model is not None and seeds > 0:
            proposals.queue_best_predicted(
                study, self.space, self.model, self.budget_gib, seeds,
                max_time_error=self.settings.predict.trust_time_error,
                min_rank=self.settings.predict.trust_rank,
                ranking=(lambda: self.refitter.held_out_rank(StudyView(study).records))
                if self.refitter is not None else None,
                follow=self.settings.predict.follow)
        trial = study.ask(self.space.distributions())
        label = params_label(trial.params) + (
            " (simulated)" if self.settings.simulate else "")
        trial.set_user_attr(R.WORKER, reaping.worker_identity())
        reaping.beat(trial)
        if budget.budget_spent(study, self.settings.n_trials):
            return self._budget_spent(study, trial)
        proposal = filters.Proposal.of(trial, self.space)
        verdict = filters.first_verdict(self.filters, proposal, StudyView(study))
        if isinstance(verdict, filters.Reused):
            return self._reuse(study, trial, label, verdict.original, progress)
        if isinstance(verdict, filters.Rejected):
            scoring.tell_rejected(study, trial, verdict.why, budget_gib=self.budget_gib,
                                  outcome=verdict.outcome)
            progress.trial_done(trial.number, label, verdict.outcome, None, launched=False)
            return Settled(launched=False)
        claim = budget.claim_launch(study, trial, proposal.params, self.settings.n_trials,
                                    self.storage, self.settings.study)
        if claim.twin is not None:
            return Ready(trial, proposal.params, proposal.cfg, label, devices=0,
                         twin=claim.twin)
        if not claim.granted:
            return self._budget_spent(study, trial)
        alone = proposal.is_baseline and not budget.any_settled_launch(study, trial.number)
        return Ready(trial, proposal.params, proposal.cfg, label,
                     devices=proposal.cfg.parallel.devices, alone=alone)

    def _budget_spent(self, study: optuna.Study, trial: optuna.Trial) -> Settled:
        scoring.tell_rejected(study, trial, "the launch budget was spent by other workers",
                              budget_gib=self.budget_gib, outcome=Outcome.BUDGET)
        return Settled(launched=False)

    def _reuse(self, study: optuna.Study, trial: optuna.Trial, label: str,
               original: optuna.trial.FrozenTrial, progress: SweepProgress) -> Settled:
        scoring.tell_reused(study, trial, original, multi_objective=self.multi)
        progress.trial_done(trial.number, label, R.outcome_of(original),
                            original.values[0] if original.values else None, launched=False)
        return Settled(launched=False)

    def _run(self, study: optuna.Study, ready: Ready, progress: SweepProgress,
             placement: Placement) -> Settled:
        """Launch a ready proposal on its placement, follow it, race it, tell the study;
        a trial another worker took over meanwhile is given up here, its result dropped."""
        try:
            return self._run_trial(study, ready, progress, placement)
        except (UpdateFinishedTrialError, ValueError):  # Optuna's "already finished"
            stored = taken_over(study, ready.trial)
            if stored is None:
                raise
            progress.note(f"trial {ready.trial.number}: taken over by another worker while this "
                          "orchestrator was silent past sweep.heartbeat_timeout_s (failed as "
                          "orphaned and re-queued there); its result here is dropped")
            return Settled(launched=False)

    def _run_trial(self, study: optuna.Study, ready: Ready, progress: SweepProgress,
                   placement: Placement) -> Settled:
        trial = ready.trial
        if ready.twin is not None:
            return self._await_twin(study, ready, progress)
        retry = bool(trial.user_attrs.get(R.CONTENDED_RETRY))
        try:
            if retry:
                self._wait_for_quiet(trial, trial.user_attrs.get(reaping.RETRY_OF), progress)
            before = StudyView(study)
            leader = before.best(self.budget_gib)
            # The best as fast as it would run now: the baseline's runs measure the drift.
            best = (leader.tokens_per_s * selection.drift_factor(
                selection.baseline(before.records), leader) if leader is not None else None)
            with full_is_diskfull(self.dir):
                result = self._launch(trial, ready.cfg, ready.label, progress, placement,
                                      best=best)
            check_room(self.dir)  # a trial that ended on a full disk lost its last records
            if not retry and self._slow_under_load(result):
                reaping.requeue(study, trial, Outcome.CONTENDED,
                                f"{result.detail}, while {result.conditions.text()}; re-queued "
                                "once, to run when the host is quiet",
                                attrs={R.CONTENDED_RETRY: True})
                progress.trial_done(trial.number, ready.label, Outcome.CONTENDED, None,
                                    launched=True)
                return Settled(launched=True)
            pooled = None
            if result.reason is Outcome.OK and result.summary is not None and not self.multi:
                pooled = race(study, trial.number, result.summary.performance, leader,
                              before.records, rounds=self.settings.race.rounds,
                              prior_cv=self.prior_cv,
                              layout=self.layout, measure=self._measure, note=progress.note)
        except (Stopped, DiskFull) as stopped:
            interrupt(study, trial, stopped, outage=self.storage.outage, reserve=self.reserve,
                      run_dir=self.layout.trial(trial.number).path
                      if isinstance(stopped, DiskFull) else None)
            raise
        is_baseline = ready.params == self.space.baseline
        state = scoring.tell(study, trial, result, budget_gib=self.budget_gib,
                             multi_objective=self.multi, pooled_tokens_per_s=pooled,
                             contention_cores=self.settings.contention_cores,
                             target_interval=ready.cfg.run.target_interval if is_baseline
                             else None, files=self._files(trial.number, ready.cfg))
        after = StudyView(study)
        if self.refitter is not None:
            refused = self.refitter.after_trial(study, after.records, trial.number)
            if refused:
                progress.note(refused)
        complete = state is TrialState.COMPLETE
        perf = result.summary.perf if result.summary else None
        tps = pooled or (perf.tokens_per_s if perf else None)
        progress.trial_done(trial.number, ready.label, result.reason, tps if complete else None,
                            launched=True, note=selection.versus_baseline_text(
                                after.records, trial.number, self.prior_cv) if complete else "",
                            flags=after.record(trial.number).flags,
                            unit=perf.unit if perf else None)
        if is_baseline and after.record(trial.number).imprecise and self.checks is not None:
            self.checks.request()  # it missed its precision target: measured again next
        stop = ((budget.fatal_baseline(trial.number, result)
                 or futility.baseline_diverged(after.record(trial.number), self.space.describe()))
                if is_baseline else None)
        return Settled(launched=True, stop=stop)

    def _files(self, number: int, cfg: TrialConfig) -> RunFiles:
        """A launched trial's files, for its artifacts (optuna-dashboard shows them)."""
        run_dir = self.layout.trial(number)
        return RunFiles(self.layout.artifacts, run_dir, run_dir.metrics(cfg))

    def _slow_under_load(self, result: monitor.TrialResult) -> bool:
        """Stopped as slow while other processes loaded the host (one trial at a time: side
        by side, the sweep's own trials are the load)."""
        return (result.reason is Outcome.SLOW and result.conditions is not None
                and self.settings.parallel_trials == 1
                and result.conditions.loaded_at_the_end(self.settings.contention_cores))

    def _wait_for_quiet(self, trial: optuna.Trial, stopped: int | None,
                        progress: SweepProgress) -> None:
        """Before the re-run of a configuration stopped as slow under load (in trial
        ``stopped``, the retry's ``retry_of``): wait (beating) for the host to be quiet, up
        to ``sweep.quiet_wait_s``."""
        which = f"trial {stopped}'s configuration" if stopped is not None else "a configuration"
        progress.note(f"trial {trial.number}: re-runs {which}, stopped as slow under load; "
                      f"waiting up to {self.settings.quiet_wait_s:g} s for the host to be "
                      "quiet")

        def still_here() -> None:
            self._check_stopping()
            reaping.beat(trial)

        load = wait_for_quiet(self.settings.contention_cores,
                              max_wait_s=self.settings.quiet_wait_s, tick=still_here)
        if load > self.settings.contention_cores:
            progress.note(f"trial {trial.number}: the host is still loaded ({load:.2f} cores "
                          "of other processes); running it anyway")

    def _measure(self, source, run_dir, name: str) -> dict | None:
        """One more run of a trial's configuration through the sweep's runner (racing)."""
        return rerun(self.runner, source, run_dir, self.settings, name=name)

    def _await_twin(self, study: optuna.Study, ready: Ready, progress: SweepProgress) -> Settled:
        """The same configuration is running elsewhere: wait for it, reuse its result."""
        progress.note(f"trial {ready.trial.number}: {ready.label} is running as trial "
                      f"{ready.twin}; waiting to reuse its result instead of launching it again")

        def still_here() -> None:  # a waiting trial beats too, or a new worker reaps it
            self._check_stopping()
            reaping.beat(ready.trial)

        original = twins.await_twin(study, ready.trial, ready.twin, still_here=still_here,
                                    budget_gib=self.budget_gib)
        if original is None:
            return Settled(launched=False)
        return self._reuse(study, ready.trial, ready.label, original, progress)

    def _check_stopping(self) -> None:
        """In a trial thread: the main thread was told to stop (raise, to unwind)."""
        if self._stopping.is_set():
            raise Stopped(getattr(self._stopped_by, "signum", signal.SIGTERM))

    def _launch(self, trial: optuna.Trial, cfg: TrialConfig, label: str,
                progress: SweepProgress, placement: Placement, *,
                best: float | None) -> monitor.TrialResult:
        """Start the trial and follow it; ``best`` is the tokens/s the slow rule judges by
        (no slow rule in a Pareto study: a slow trial may be the memory-light end)."""
        def slow(steps) -> str | None:
            return None if self.multi else self.pruner.verdict(trial, steps, best,
                                                               cfg.run.warmup_steps,
                                                               unit=progress.unit)

        def tick(phase: str) -> None:
            self._check_stopping()
            progress.trial_phase(trial.number, label, phase)

        return launch_trial(trial, cfg, runner=self.runner, layout=self.layout,
                            settings=self.settings, placement=placement, slow=slow, tick=tick,
                            note=progress.note)
