"""One proposal's life: ask -> filter -> claim -> launch -> follow -> race -> score -> decide.

:meth:`Proposals.prepare` asks the sampler for a point and settles it without a launch
(rejected by a filter, the result of an identical trial reused, the budget spent) or
returns it Ready, its launch claimed. :meth:`Proposals.run` launches a Ready proposal
on its devices, follows it under the stop rules, races it against the leader, tells
the study, refits the cost model, and says whether the sweep must stop (the baseline
failed). The sweep's loop (autotune/sweep.py) calls the two, one at a time or from
trial threads side by side (autotune/running/dispatch.py).
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from autotune.presentation.labels import params_label
from autotune.progress import SweepProgress
from autotune.running import monitor
from autotune.running.conditions import wait_for_quiet
from autotune.running.devices import Placement
from autotune.running.dispatch import Ready, Settled
from autotune.running.launch import launch_trial
from autotune.running.pruning import run_to_run_spread
from autotune.running.repeat import measured_performance, rerun
from autotune.search import filters, proposals
from autotune.search.baseline_checks import BaselineChecks
from autotune.search.racing import race
from autotune.settings import Pruner
from autotune.signals import Stopped
from autotune.study import budget, futility, noise, reaping, scoring, selection, twins
from autotune.study import records as R
from autotune.study.artifacts import RunFiles
from autotune.study.conditions import STAYS_LOADED_RUNS, stays_loaded
from autotune.study.disk import DiskFull, check_room, full_is_diskfull
from autotune.study.interruption import interrupt, taken_over
from autotune.study.schema.keys import PROPOSED_AS, ROLE
from autotune.study.sweep_end import SweepEnd
from autotune.study.view import StudyView
from autotune.sweep_context import SweepContext
from trials.contract.outcomes import Outcome
from trials.contract.schema import TrialConfig


@dataclass(frozen=True)
class Measured:
    """A launched trial's result, and its tokens/s pooled over the race's re-runs (None:
    not raced)."""

    result: monitor.TrialResult
    pooled_tokens_per_s: float | None


def filter_chain(context: SweepContext, ruled_out: dict) -> list[filters.Filter]:
    """The checks a proposal meets before launch, cheapest first; ``ruled_out``: knob values
    an earlier tuning stage ruled out (``tune``: correctness)."""
    chain: list[filters.Filter] = [filters.Structural(), filters.RuledOutByStage(ruled_out),
                                   filters.Reuse()]
    if context.model is not None:
        chain.append(filters.PredictedOOM(context.model, context.budget_gib,
                                          context.settings.predict))
    return [*chain, filters.OOMDominance()]


class Proposals:
    """The proposals of one run of a sweep over ``study``, each from ask to told.

    Trial threads of a concurrent sweep share one; the main thread raises ``stopping``
    when it is told to stop, and each trial thread unwinds on its next tick.
    """

    def __init__(self, context: SweepContext, study: optuna.Study, progress: SweepProgress,
                 *, ruled_out: dict) -> None:
        self.context = context
        self.settings = context.settings
        self.study = study
        self.progress = progress
        self.filters = filter_chain(context, ruled_out)
        #: The baseline's re-measurements (one-at-a-time sweeps; None side by side).
        self.checks = (BaselineChecks(self.settings.baseline_every, context.layout,
                                      self.measure, progress.note)
                       if self.settings.parallel_trials <= 1 else None)
        if self.checks is not None:  # a baseline measured before this run, imprecise
            self.checks.request_if_imprecise(selection.baseline(StudyView(study).records))
        #: Concurrent trials: set when the main thread is told to stop; trial threads see it.
        self.stopping = threading.Event()
        self.stopped_by: BaseException | None = None

    # -- before launch: ask, filter, claim ------------------------------------------------
    def prepare(self) -> Settled | Ready:
        """Ask for a point and check it: rejected or reused here (Settled), or Ready to run
        with its launch claimed."""
        self._queue_seeds()
        study, space = self.study, self.context.space
        trial = study.ask(space.distributions())
        # Every progress line of the trial says why it was proposed.
        why = PROPOSED_AS.get(trial.user_attrs.get(ROLE),
                                f"the sampler, {self.settings.sampler.value}")
        label = (params_label(trial.params) + f" ({why})"
                 + (" (simulated)" if self.settings.simulate else ""))
        trial.set_user_attr(R.WORKER, reaping.worker_identity().to_json())
        reaping.beat(trial)
        if budget.budget_spent(study, self.settings.n_trials):
            return self._budget_spent(trial)
        proposal = filters.Proposal.of(trial, space)
        verdict = filters.first_verdict(self.filters, proposal, StudyView(study))
        if isinstance(verdict, filters.Reused):
            return self._reuse(trial, label, verdict.original)
        if isinstance(verdict, filters.Rejected):
            scoring.tell_rejected(study, trial, verdict.why, budget_gib=self.context.budget_gib,
                                  outcome=verdict.outcome)
            self.progress.trial_done(trial.number, label, verdict.outcome, None, launched=False)
            return Settled(launched=False)
        return self._claim(trial, proposal, label)

    def _queue_seeds(self) -> None:
        """Queue the points the sampler should take next: the baseline's next one-knob
        change (``sweep.neighbours``; by default where the cost model cannot time the
        workload), the cost model's best predictions."""
        study, context, predict = self.study, self.context, self.settings.predict
        neighbours = self.settings.neighbours
        if neighbours is None:
            neighbours = not proposals.model_times(context.space, context.model)
        if neighbours:
            proposals.queue_next_neighbour(study, context.space)
        # Seeds past the budget would wait in the study for a run that never comes.
        seeds = min(predict.enqueue_best, self.settings.n_trials - budget.count_launches(study))
        if context.model is None or seeds <= 0:
            return
        refitter = context.refitter
        proposals.queue_best_predicted(
            study, context.space, context.model, context.budget_gib, seeds,
            max_time_error=predict.trust_time_error, min_rank=predict.trust_rank,
            ranking=(lambda: refitter.held_out_rank(StudyView(study).records))
            if refitter is not None else None,
            follow=predict.follow,
            slow_ratio=(self.settings.stop.slow_ratio
                        if self.settings.pruner is Pruner.slow else 0.0),
            measured_terms=(lambda: refitter.measured_terms(StudyView(study).records))
            if refitter is not None else None)

    def _claim(self, trial: optuna.Trial, proposal: filters.Proposal,
               label: str) -> Settled | Ready:
        """Claim the proposal's launch (under the study's launch lock): Ready to run, Ready
        to wait for its twin running elsewhere, or the budget is spent."""
        claim = budget.claim_launch(self.study, trial, proposal.params, self.settings.n_trials,
                                    self.context.storage, self.settings.study)
        if claim.twin is not None:
            return Ready(trial, proposal.params, proposal.cfg, label, devices=0,
                         twin=claim.twin)
        if not claim.granted:
            return self._budget_spent(trial)
        alone = proposal.is_baseline and not budget.any_settled_launch(self.study, trial.number)
        return Ready(trial, proposal.params, proposal.cfg, label,
                     devices=proposal.cfg.parallel.devices, alone=alone)

    def settle_unlaunchable(self) -> int:
        """Once the whole budget is spent: the points still queued (a worker queued its seed
        while another claimed the last launch) will never run; each is told as the
        budget's, so that no trial of a finished study stays WAITING. How many."""
        settled = 0
        while self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            # ask takes a queued point first; one another worker took meanwhile makes
            # this a fresh trial, told the same way.
            self._budget_spent(self.study.ask(self.context.space.distributions()))
            settled += 1
        return settled

    def _budget_spent(self, trial: optuna.Trial) -> Settled:
        scoring.tell_rejected(self.study, trial, "the launch budget was spent by other workers",
                              budget_gib=self.context.budget_gib, outcome=Outcome.BUDGET)
        return Settled(launched=False)

    def _reuse(self, trial: optuna.Trial, label: str,
               original: optuna.trial.FrozenTrial) -> Settled:
        scoring.tell_reused(self.study, trial, original,
                            multi_objective=self.context.multi_objective)
        self.progress.trial_done(trial.number, label, R.outcome_of(original),
                                 original.values[0] if original.values else None,
                                 launched=False)
        return Settled(launched=False)

    # -- launch, follow, race -------------------------------------------------------------
    def run(self, ready: Ready, placement: Placement) -> Settled:
        """Launch a ready proposal on its placement, follow it, race it, tell the study;
        a trial another worker took over meanwhile is given up here, its result dropped."""
        try:
            if ready.twin is not None:
                return self._await_twin(ready)
            measured = self._measure_trial(ready, placement)
            if isinstance(measured, Settled):
                return measured
            return self._score(ready, measured)
        except (UpdateFinishedTrialError, ValueError):  # Optuna's "already finished"
            stored = taken_over(self.study, ready.trial)
            if stored is None:
                raise
            self.progress.note(
                f"trial {ready.trial.number}: taken over by another worker while this "
                "orchestrator was silent past sweep.heartbeat_timeout_s (failed as orphaned "
                "and re-queued there); its result here is dropped")
            return Settled(launched=False)

    def _measure_trial(self, ready: Ready, placement: Placement) -> Measured | Settled:
        """Run the trial (and its race); a trial stopped under load is re-queued (Settled). A
        stop or a full disk on the way is recorded on the trial before it unwinds."""
        trial, root = ready.trial, self.context.layout.root
        retry = bool(trial.user_attrs.get(R.CONTENDED_RETRY))
        try:
            if retry:
                self._wait_for_quiet(trial, trial.user_attrs.get(reaping.RETRY_OF))
            before = StudyView(self.study)
            leader = before.best(self.context.budget_gib)
            # The best as fast as it would run now: the baseline's runs measure the drift.
            best = (leader.tokens_per_s * selection.drift_factor(
                selection.baseline(before.records), leader) if leader is not None else None)
            # What the slow rule's interval must hold beyond the trial's steps: the
            # run-to-run noise of its one run against the best's runs, and the spread of
            # steps the study's runs show (pruning.slow_verdict).
            spread = {"noise": run_to_run_spread(
                noise.run_to_run_noise(before.records, self.context.prior_cv).interval_cv,
                len(noise.runs_of(leader))) if leader is not None else 0.0,
                "step_cv": noise.step_spread(before.records)}
            with full_is_diskfull(root):
                result = self._launch(trial, ready.cfg, ready.label, placement, best=best,
                                      spread=spread)
            check_room(root)  # a trial that ended on a full disk lost its last records
            if not retry and self._slow_under_load(result):
                if not self._judged_as_loaded(ready, result, best, spread):
                    return self._requeue_contended(ready, result)
            return Measured(result, self._race(trial, result, leader, before))
        except (Stopped, DiskFull) as stopped:
            interrupt(self.study, trial, stopped, outage=self.context.storage.outage,
                      reserve=self.context.reserve,
                      run_dir=self.context.layout.trial(trial.number).path
                      if isinstance(stopped, DiskFull) else None)
            raise

    def _launch(self, trial: optuna.Trial, cfg: TrialConfig, label: str,
                placement: Placement, *, best: float | None,
                spread: dict[str, float]) -> monitor.TrialResult:
        """Start the trial and follow it; ``best`` is the tokens/s the slow rule judges by,
        ``spread`` the noise its interval holds (no slow rule in a Pareto study: a slow
        trial may be the memory-light end)."""
        def slow(steps) -> str | None:
            return None if self.context.multi_objective else self.context.pruner.verdict(
                trial, steps, best, cfg.run.warmup_steps, unit=self.progress.unit, **spread)

        def tick(phase: str) -> None:
            self._check_stopping()
            self.progress.trial_phase(trial.number, label, phase)

        return launch_trial(trial, cfg, runner=self.context.runner, layout=self.context.layout,
                            settings=self.settings, placement=placement, slow=slow, tick=tick,
                            note=self.progress.note)

    def _race(self, trial: optuna.Trial, result: monitor.TrialResult,
              leader: R.TrialRecord | None, before: StudyView) -> float | None:
        """A completed trial raced against the leader: its tokens/s pooled over the re-runs
        (None: not raced; a Pareto study has no single leader)."""
        if result.reason is not Outcome.OK or result.summary is None \
                or self.context.multi_objective:
            return None
        return race(self.study, trial.number, measured_performance(result, self.settings), leader,
                    before.records, rounds=self.settings.race.rounds,
                    prior_cv=self.context.prior_cv, layout=self.context.layout,
                    measure=self.measure, note=self.progress.note)

    def measure(self, source, run_dir, name: str) -> dict | None:
        """One more run of a trial's configuration through the sweep's runner (racing, the
        baseline's checks)."""
        return rerun(self.context.runner, source, run_dir, self.settings, name=name)

    # -- contention -----------------------------------------------------------------------
    def _slow_under_load(self, result: monitor.TrialResult) -> bool:
        """Stopped as slow, or by a clock (hang, timeout), while other processes loaded the
        host: not a verdict on the configuration (one trial at a time: side by side, the
        sweep's own trials are the load)."""
        return (result.conditions is not None and self.settings.parallel_trials == 1
                and result.conditions.may_explain(result.reason,
                                                  self.settings.contention_cores))

    def _judged_as_loaded(self, ready: Ready, result: monitor.TrialResult,
                          best: float | None, spread: dict[str, float]) -> bool:
        """A trial stopped as slow under load is told slow as it is, not re-run, when the
        load cannot have made it slow: the rule stops it even against ``best`` (what it was
        judged against) slowed by the most that load can take
        (:meth:`Conditions.speed_left`). Or when the rule compared like with like: it
        judged against the best re-scaled by the baseline's latest run
        (:func:`selection.drift_factor`), so when that run was measured under load too,
        both sides of the comparison carried the load. Else when the host stays loaded
        (:func:`conditions.stays_loaded` over the study's runs, this one the newest):
        waiting for a quiet host that does not come would only run it twice. A clock's
        verdict (hang, timeout) is re-queued all the same."""
        if result.reason is not Outcome.SLOW:
            return False
        left = result.conditions.speed_left()
        if best and left is not None and self.context.pruner.verdict_against(
                result.steps, best * left, ready.cfg.run.warmup_steps, **spread) is not None:
            self.progress.note(
                f"trial {ready.trial.number}: stopped as slow under load, and slow even "
                f"against the best slowed to {left:.2f} of its speed, the most that load "
                "can take; not re-run")
            return True
        others = [r for r in StudyView(self.study).records if r.number != ready.trial.number]
        base = selection.baseline(others)
        if base is not None and reference_loaded(
                base, selection.best(others, self.context.budget_gib)):
            self.progress.note(
                f"trial {ready.trial.number}: stopped as slow under load, judged against "
                f"the baseline's latest run (trial {base.number}), measured under load "
                "too; not re-run")
            return True
        loads = [loaded for _, loaded in sorted(
            run for r in others for run in timed_loads(r))] + [True]
        if not stays_loaded(loads):
            return False
        self.progress.note(
            f"trial {ready.trial.number}: stopped as slow while the host stays loaded "
            f"({sum(loads[-STAYS_LOADED_RUNS:])} of its last {STAYS_LOADED_RUNS} runs); judged "
            "against the baseline measured under the same load, not re-run")
        return True

    def _requeue_contended(self, ready: Ready, result: monitor.TrialResult) -> Settled:
        """Stopped under load: re-queued once, to run again when the host is quiet. Its
        conditions stay on it: whether the host stays loaded is read from every run."""
        trial = ready.trial
        trial.set_user_attr(R.CONDITIONS, result.conditions.judge(
            self.settings.contention_cores).to_dict())
        reaping.requeue(self.study, trial, Outcome.CONTENDED,
                        f"{result.detail}, while {result.conditions.text()}; re-queued "
                        "once, to run when the host is quiet",
                        attrs={R.CONTENDED_RETRY: True})
        self.progress.trial_done(trial.number, ready.label, Outcome.CONTENDED, None,
                                 launched=True)
        return Settled(launched=True)

    def _wait_for_quiet(self, trial: optuna.Trial, stopped: int | None) -> None:
        """Before the re-run of a configuration stopped under load (in trial
        ``stopped``, the retry's ``retry_of``): wait (beating) for the host to be quiet, up
        to ``sweep.quiet_wait_s``."""
        quiet_wait_s, cores = self.settings.quiet_wait_s, self.settings.contention_cores
        which = f"trial {stopped}'s configuration" if stopped is not None else "a configuration"
        self.progress.note(f"trial {trial.number}: re-runs {which}, stopped under "
                           f"load; waiting up to {quiet_wait_s:g} s for the host to be quiet")

        def still_here() -> None:
            self._check_stopping()
            reaping.beat(trial)

        load = wait_for_quiet(cores, max_wait_s=quiet_wait_s, tick=still_here)
        if load > cores:
            self.progress.note(f"trial {trial.number}: the host is still loaded ({load:.2f} "
                               "cores of other processes); running it anyway")

    # -- score and decide -----------------------------------------------------------------
    def _score(self, ready: Ready, measured: Measured) -> Settled:
        """Tell the study, refit the cost model, show the trial; a baseline that failed, or
        diverged at once, stops the sweep."""
        trial, result, pooled = ready.trial, measured.result, measured.pooled_tokens_per_s
        is_baseline = ready.params == self.context.space.baseline
        state = scoring.tell(self.study, trial, result, budget_gib=self.context.budget_gib,
                             multi_objective=self.context.multi_objective,
                             pooled_tokens_per_s=pooled,
                             contention_cores=self.settings.contention_cores,
                             target_interval=ready.cfg.run.target_interval if is_baseline
                             else None, files=self._files(trial.number, ready.cfg))
        after = StudyView(self.study)
        if self.context.refitter is not None:
            refused = self.context.refitter.after_trial(self.study, after.records, trial.number)
            if refused:
                self.progress.note(refused)
        self._show(ready, measured, after, complete=state is TrialState.COMPLETE)
        if not is_baseline:
            return Settled(launched=True)
        record = after.record(trial.number)
        if self.checks is not None:  # it missed its precision target: measured again next
            self.checks.request_if_imprecise(record)
        return Settled(launched=True, stop=self._baseline_stop(trial.number, result, record))

    def _show(self, ready: Ready, measured: Measured, after: StudyView, *,
              complete: bool) -> None:
        """The trial's line on the progress display."""
        number, result = ready.trial.number, measured.result
        perf = result.summary.perf if result.summary else None
        tps = measured.pooled_tokens_per_s or (perf.tokens_per_s if perf else None)
        note = (selection.versus_baseline_text(after.records, number, self.context.prior_cv)
                if complete else "")
        self.progress.trial_done(number, ready.label, result.reason, tps if complete else None,
                                 launched=True, note=note, flags=after.record(number).flags,
                                 unit=perf.unit if perf else None)

    def _baseline_stop(self, number: int, result: monitor.TrialResult,
                       record: R.TrialRecord) -> SweepEnd | None:
        """Why the sweep ends after its baseline: it failed as every trial would, or its
        loss was never finite (the workload, not a knob)."""
        return (budget.fatal_baseline(number, result)
                or futility.baseline_diverged(record, self.context.space.describe()))

    def _files(self, number: int, cfg: TrialConfig) -> RunFiles:
        """A launched trial's files, for its artifacts (optuna-dashboard shows them)."""
        run_dir = self.context.layout.trial(number)
        return RunFiles(self.context.layout.artifacts, run_dir, run_dir.metrics(cfg))

    # -- waiting --------------------------------------------------------------------------
    def _await_twin(self, ready: Ready) -> Settled:
        """The same configuration is running elsewhere: wait for it, reuse its result."""
        self.progress.note(f"trial {ready.trial.number}: {ready.label} is running as trial "
                           f"{ready.twin}; waiting to reuse its result instead of launching "
                           "it again")

        def still_here() -> None:  # a waiting trial beats too, or a new worker reaps it
            self._check_stopping()
            reaping.beat(ready.trial)

        original = twins.await_twin(self.study, ready.trial, ready.twin, still_here=still_here,
                                    budget_gib=self.context.budget_gib)
        if original is None:
            return Settled(launched=False)
        return self._reuse(ready.trial, ready.label, original)

    def _check_stopping(self) -> None:
        """In a trial thread: the main thread was told to stop (raise, to unwind)."""
        if self.stopping.is_set():
            raise Stopped(getattr(self.stopped_by, "signum", signal.SIGTERM))


def reference_loaded(base: R.TrialRecord, best: R.TrialRecord | None) -> bool:
    """Whether what the slow rule judged a trial against carried load: the baseline's latest
    run was measured under load, and the best was the baseline itself, was measured under
    load too, or was re-scaled by a baseline run measured after it
    (:func:`selection.drift_factor`)."""
    runs = sorted(timed_loads(base))
    if not runs or not runs[-1][1]:
        return False
    if best is None or best.number == base.number or best.contended:
        return True
    best_at = best.finished.timestamp() if best.finished is not None else None
    return best_at is not None and runs[-1][0] > best_at


def timed_loads(record: R.TrialRecord) -> list[tuple[float, bool]]:
    """(when it ended, epoch seconds, 0 where not known; measured under load) of each of
    the record's sweep runs."""
    return [(at or 0.0, loaded)
            for (at, _), loaded in zip(record.timed_runs(), record.sweep_run_loads())]
