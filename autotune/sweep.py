"""The sweep: ask -> check -> launch -> watch -> tell, until the launch budget is spent.

The loop is an outline over the pieces that own each concern: ``search``
(the space and what it rules out before launch), ``running`` (one trial process,
its stop rules and its outcome), ``study`` (storage, budget, reaping, scoring,
selection).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState
from rich.console import Console

from autotune.plan import learning
from autotune.plan.costmodel import CostModel
from autotune.profiling.winner import profile_winner
from autotune.progress import SweepProgress
from autotune.report import leaderboard
from autotune.running import launcher, monitor, preflight, pruning
from autotune.running.devices import UNPLACED, DevicePool, Placement
from autotune.running.dispatch import Dispatcher, Ready, Settled
from autotune.running.repeat import rerun
from autotune.search import feasibility, proposals
from autotune.search.space import SearchSpace
from autotune.settings import Launcher, Objective, SweepSettings
from autotune.signals import Stopped
from autotune.stages import store as stages
from autotune.study import budget, noise, reaping, scoring, selection
from autotune.study import records as R
from autotune.study import storage as S
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance
from trials.contract.schema import (
    ConfigError,
    TrialConfig,
    memory_budget_gib,
    micro_batch_size,
    runnable_problem,
    to_trial_config,
)

log = logging.getLogger(__name__)

#: The run settings that decide what a trial's tokens/s means (part of the fingerprint).
MEASUREMENT_KEYS = ("adaptive", "warmup_steps", "max_warmup_steps", "steady_window",
                    "steady_tolerance", "measure_steps", "max_measure_steps", "target_interval")
#: Proposals in a row that launch nothing (duplicates, rejections) before the sweep gives up.
MAX_IDLE_PROPOSALS = 200
#: Outcomes of the baseline that end the sweep: the rest would fail the same way.
FATAL_FOR_BASELINE = (Outcome.CONFIG_ERROR, Outcome.CRASH)


@dataclass
class SweepOutcome:
    exit_code: int
    message: str
    study: optuna.Study | None = None


class Sweep:
    def __init__(self, composed: DictConfig, overrides: list[str], console: Console) -> None:
        self.settings: SweepSettings = OmegaConf.to_object(composed.sweep)
        self.search = OmegaConf.to_object(composed.search)
        self.profile_options = OmegaConf.to_object(composed.profile)
        self.console = console
        S.check_study_name(self.settings.study)
        self.space = SearchSpace.from_config(self.search, composed, overrides)
        self.base: TrialConfig = to_trial_config(composed)
        self.trial_command = launcher.trial_command(self.settings.simulate,
                                                    self.settings.trial_command)
        if not self.trial_command:
            problem = runnable_problem(self.base)
            if problem:
                raise ConfigError(problem)
            preflight.check_workload_entry(self.base.workload.entry)
        self.budget_gib = memory_budget_gib(self.base)
        # The cost model of this profile; None for a user workload (no dimensions).
        self.model = (None if self.base.workload.entry
                      else CostModel.for_profile(self.base.hardware))
        self._configs: dict = {}  # trial number -> its resolved config, read once
        self.multi = self.settings.objective is Objective.pareto
        self.dir = S.study_dir(self.settings)
        #: Knob values an earlier tuning stage ruled out (``tune``: correctness).
        self.ruled_out: dict = {}
        #: Concurrent trials: set when the main thread is told to stop; trial threads see it.
        self._stopping = threading.Event()
        self._stopped_by: BaseException | None = None
        self._refit_lock = threading.Lock()
        self._check_devices()
        _, problem = feasibility.structural_problem(self.space, self.space.baseline)
        if problem:
            raise ConfigError(f"the baseline configuration is impossible: {problem}")
        self.slurm = None
        if self.settings.launcher is Launcher.slurm:
            from autotune.running.slurm import SlurmLauncher, check_cluster

            check_cluster(self.settings.slurm)
            self.slurm = SlurmLauncher(self.settings.slurm, self.settings.study)

    def _check_devices(self) -> None:
        """Jobs and concurrent trials must fit the devices the launcher can give them."""
        hw, s = self.base.hardware, self.settings
        slurm = s.launcher is Launcher.slurm
        self.space.nodes = s.slurm.max_nodes if slurm else 1
        job = self.space.devices or self.base.parallel.devices
        if job > hw.devices * self.space.nodes:
            where = (f"{self.space.nodes} node(s) of {hw.devices} devices" if slurm else
                     f"the hardware profile {hw.name!r} has {hw.devices} devices")
            fix = ("raise sweep.slurm.max_nodes" if slurm else
                   "run on a cluster with sweep.launcher=slurm sweep.slurm.max_nodes=N")
            raise ConfigError(f"a job of {job} devices does not fit: {where}; lower "
                              f"search.devices / parallel.split, or {fix}")
        if not slurm and s.parallel_trials > hw.devices:
            raise ConfigError(f"sweep.parallel_trials={s.parallel_trials} trials side by side "
                              f"need at least as many devices, and the hardware profile "
                              f"{hw.name!r} has {hw.devices}: lower sweep.parallel_trials")

    def fingerprint_parts(self) -> dict:
        b = OmegaConf.structured(self.base)
        return {"search_space": self.space.describe(), "search_devices": self.space.devices,
                "workload": OmegaConf.to_container(b.workload),
                "hardware": OmegaConf.to_container(b.hardware),
                "measurement": {"run": {k: OmegaConf.to_container(b.run)[k]
                                        for k in MEASUREMENT_KEYS},
                                "global_batch": self.base.train.global_batch,
                                "data": OmegaConf.to_container(b.data),
                                # Simulated and measured trials never share a study.
                                "simulated": self.settings.simulate}}

    # -- outline --------------------------------------------------------------------------
    def open_study(self) -> optuna.Study:
        """The study of this space, workload and hardware: created, or loaded to resume."""
        S.check_runs_dir(self.settings)
        storage = S.open_storage(self.settings, create=True)
        study = S.load_or_create(self.settings, storage, self.fingerprint_parts(),
                                  self.space.distributions())
        # What the report's diagnosis quotes: the stop rules the trials really ran under.
        study.set_user_attr(S.STOP_RULES, OmegaConf.to_container(
            OmegaConf.structured(self.settings.stop)))
        return study

    def run(self) -> SweepOutcome:
        study = self.open_study()
        self.ruled_out = stages.ruled_out(study)
        reaped = self._reap(study)
        if reaped:
            self.console.print(f"reaped {len(reaped)} trial(s) left RUNNING by a stopped "
                               f"orchestrator: {reaped}; their configurations are re-queued")
        proposals.seed_baseline(study, self.space)
        if self.model is not None and self.settings.predict.enqueue_best:
            proposals.queue_best_predicted(study, self.space, self.model, self.budget_gib,
                                           self.settings.predict.enqueue_best)
        study.sampler = proposals.sampler(study, self.settings, self.space)
        done = budget.count_launches(study)
        total = self.settings.n_trials
        if done:
            self.console.print(f"resuming study {self.settings.study}: {done}/{total} launched")
        progress = SweepProgress(total, min(done, total), enabled=self.settings.progress,
                                 console=self.console)
        try:
            message = self._loop(study, progress)
        finally:
            progress.close()
        records = R.load_records(study)
        level = noise.annotate(records, self.base.hardware.cost.run_to_run_cv)
        self.console.print(leaderboard.render(records, noise_note=leaderboard.noise_line(level)),
                           highlight=False, soft_wrap=True)
        self.console.print(f"{message}\nstudy: {S.redact(S.storage_url(self.settings))} "
                           f"(name {self.settings.study}); runs: {self.dir}", highlight=False,
                           soft_wrap=True)
        failed = message.startswith("stopped:")
        if not failed and not self.trial_command:
            profile_winner(study, records, selection.best(records, self.budget_gib),
                           self.settings, self.profile_options, self.console)
        return SweepOutcome(1 if failed else 0, message, study)

    def _verdict(self, study: optuna.Study, idle: int) -> str | None:
        """Why the sweep ends before the next proposal, or None."""
        launched = budget.count_launches(study)
        if launched >= self.settings.n_trials:
            return f"done: {launched} trial(s) launched (budget {self.settings.n_trials})"
        stop = budget.failure_rate_verdict(study, launched, self.settings, self.dir)
        if stop:
            return stop
        if budget.n_evaluated_points(study) >= self.space.size:
            return (f"search space exhausted: all {self.space.size} configurations are "
                    f"evaluated or ruled out ({launched} launched)")
        if idle >= MAX_IDLE_PROPOSALS:
            return (f"stopped early: the sampler proposed {idle} evaluated or infeasible "
                    "configurations in a row")
        return None

    def _loop(self, study: optuna.Study, progress: SweepProgress) -> str:
        if self.settings.parallel_trials > 1:
            return self._loop_concurrent(study, progress)
        idle = 0
        while True:
            end = self._verdict(study, idle)
            if end:
                return end
            settled = self._one_trial(study, progress)
            if settled.stop:
                return settled.stop
            idle = 0 if settled.launched else idle + 1

    def _loop_concurrent(self, study: optuna.Study, progress: SweepProgress) -> str:
        """``sweep.parallel_trials`` trials in flight, each on devices of its own."""
        pool = None
        if self.settings.launcher is Launcher.local:
            pool = DevicePool(self.base.hardware.backend, self.base.hardware.devices)
            if pool.backend == "CPU":
                log.warning("%d CPU trials run side by side, each pinned to its own cores: "
                            "they still share memory bandwidth and caches, so their tokens/s "
                            "disturb each other; use parallel_trials=1 for the numbers you "
                            "export", self.settings.parallel_trials)
                progress.note(f"note: {self.settings.parallel_trials} concurrent CPU trials "
                              "disturb each other's numbers (shared memory bandwidth and "
                              "caches); each is pinned to its own cores")
        dispatcher = Dispatcher(
            pool, self.settings.parallel_trials,
            prepare=lambda: self._prepare(study, progress),
            run=lambda ready, placement: self._run(study, ready, progress, placement),
            verdict=lambda idle: self._verdict(study, idle),
            release=lambda ready: reaping.requeue(
                study, ready.trial, Outcome.INTERRUPTED,
                "the sweep stopped before this proposal started; re-queued"),
            stopping=self._stopping, on_stop=lambda exc: setattr(self, "_stopped_by", exc))
        return dispatcher.loop()

    # -- one proposal ---------------------------------------------------------------------
    def _one_trial(self, study: optuna.Study, progress: SweepProgress) -> Settled:
        """Ask for a point and settle it: rejected, reused, or launched and told."""
        ready = self._prepare(study, progress)
        if isinstance(ready, Settled):
            return ready
        return self._run(study, ready, progress, UNPLACED)

    def _prepare(self, study: optuna.Study, progress: SweepProgress) -> Settled | Ready:
        """Ask for a point and check it: rejected or reused here (Settled), or Ready to run
        with its launch claimed."""
        if self.settings.neighbours:
            proposals.queue_next_neighbour(study, self.space)
        trial = study.ask(self.space.distributions())
        params = dict(trial.params)
        label = leaderboard.params_label(params) + (" (simulated)" if self.settings.simulate
                                                     else "")
        trial.set_user_attr(R.WORKER, reaping.worker_identity())
        trial.set_user_attr(R.HEARTBEAT, time.time())
        if budget.budget_spent(study, self.settings.n_trials):
            return self._budget_spent(study, trial)
        cfg, problem = feasibility.structural_problem(self.space, params)
        problem = problem or stages.ruling(self.ruled_out, params)
        if problem:
            return self._reject(study, trial, label, problem, progress)
        trial.set_user_attr(R.MICRO_BATCH_SIZE, micro_batch_size(cfg))
        # A measurement outranks a prediction: an identical finished trial is reused first.
        original = budget.evaluated_result(study, params)
        if original is not None:
            return self._reuse(study, trial, label, original, progress)
        over = self._predicted_over_budget(trial, cfg, exempt=params == self.space.baseline)
        if over is not None:
            return self._reject(study, trial, label, over, progress,
                                outcome=Outcome.PREDICTED_OOM)
        records = R.load_records(study)
        oom = feasibility.oom_dominating(params, cfg, records)
        if oom is not None:
            return self._reject(study, trial, label, (
                f"trial {oom.number} ran out of memory at micro-batch size "
                f"{oom.micro_batch_size}; this one needs {micro_batch_size(cfg)}"), progress)
        claim = budget.claim_launch(study, trial, params, self.settings.n_trials,
                                    S.storage_url(self.settings), self.settings.study)
        if claim.twin is not None:
            return Ready(trial, params, cfg, label, devices=0, twin=claim.twin)
        if not claim.granted:
            return self._budget_spent(study, trial)
        first = not any(R.outcome_of(t) is not None for t in study.get_trials(deepcopy=False)
                        if t.user_attrs.get(R.LAUNCHED) and t.number != trial.number)
        return Ready(trial, params, cfg, label, devices=cfg.parallel.devices,
                     alone=first and params == self.space.baseline)

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
        """Launch a ready proposal on its placement, follow it, tell the study."""
        trial, params, cfg, label = ready.trial, ready.params, ready.cfg, ready.label
        if ready.twin is not None:
            return self._await_twin(study, ready, progress)
        try:
            records = R.load_records(study)
            leader = selection.best(records, self.budget_gib)
            result = self._launch(trial, cfg, label, progress, placement,
                                  best=leader.tokens_per_s if leader is not None else None)
            pooled = self._race(study, trial, result, leader, records, progress)
        except Stopped as stopped:
            reaping.requeue(study, trial, Outcome.INTERRUPTED,
                            f"the orchestrator received {stopped.name}; every process of the "
                            "trial was killed and its configuration re-queued")
            raise
        state = scoring.tell(study, trial, result, budget_gib=self.budget_gib,
                             multi_objective=self.multi, pooled_tokens_per_s=pooled)
        self._learn(study, trial.number)
        tps = pooled or (result.summary.perf.tokens_per_s if result.summary
                         else None)
        progress.trial_done(trial.number, label, result.reason,
                            tps if state is TrialState.COMPLETE else None, launched=True,
                            note=self._versus_baseline(study, trial.number)
                            if state is TrialState.COMPLETE else "")
        return Settled(launched=True, stop=self._baseline_verdict(trial, params, result))

    def _await_twin(self, study: optuna.Study, ready: Ready, progress: SweepProgress) -> Settled:
        """The same configuration is running elsewhere: wait for it, reuse its result."""
        progress.note(f"trial {ready.trial.number}: {ready.label} is running as trial "
                      f"{ready.twin}; waiting to reuse its result instead of launching it again")
        def still_here() -> None:  # a waiting trial beats too, or a new worker reaps it
            self._check_stopping()
            ready.trial.set_user_attr(R.HEARTBEAT, time.time())

        try:
            original = budget.wait_for(study, ready.twin, poll_s=2.0, should_stop=still_here)
        except Stopped:
            reaping.requeue(study, ready.trial, Outcome.INTERRUPTED,
                            "the orchestrator stopped while waiting for a twin; re-queued")
            raise
        if R.evaluated(original):
            return self._reuse(study, ready.trial, ready.label, original, progress)
        # The twin was lost (its orchestrator died, or it was interrupted): it is re-queued.
        scoring.tell_rejected(study, ready.trial, f"trial {ready.twin}, the same configuration, "
                              "was lost and re-queued; not launched twice",
                              budget_gib=self.budget_gib, outcome=Outcome.BUDGET)
        return Settled(launched=False)

    def _check_stopping(self) -> None:
        """In a trial thread: the main thread was told to stop (raise, to unwind)."""
        if self._stopping.is_set():
            raise Stopped(getattr(self._stopped_by, "signum", signal.SIGTERM))

    def _versus_baseline(self, study: optuna.Study, number: int) -> str:
        """The trial's gain over the baseline with its interval, for its progress line."""
        records = R.load_records(study)
        noise.annotate(records, self.base.hardware.cost.run_to_run_cv)
        record = next(r for r in records if r.number == number)
        if record.role == selection.BASELINE_ROLE:
            return "the baseline: every gain below is measured against it"
        return f"vs baseline {record.vs_baseline.text()}" if record.vs_baseline else ""

    # -- racing ---------------------------------------------------------------------------
    def _race(self, study: optuna.Study, trial: optuna.Trial, result: monitor.TrialResult,
              leader: R.TrialRecord | None, records: list[R.TrialRecord],
              progress: SweepProgress) -> float | None:
        """A new trial within noise of the best: re-run both, interleaved, ``race.rounds``
        times; the pooled tokens/s of the new one (the sampler is told that), or None."""
        rounds = self.settings.race.rounds
        if not rounds or self.multi or leader is None or not leader.trial_dir or \
                result.reason is not Outcome.OK or result.summary is None:
            return None
        level = noise.run_to_run_noise(records, self.base.hardware.cost.run_to_run_cv)
        new_runs = noise.runs_from([result.summary.performance])
        gain = noise.compare(new_runs, noise.runs_of(leader), level)
        if gain is None or gain.real:
            return None
        progress.note(f"racing trial {trial.number} against the best, trial {leader.number} "
                      f"({gain.text()}): {rounds} interleaved round(s)")
        trial_dir = self.dir / f"trial-{trial.number:04d}"
        entrants = {leader.number: (leader.params, Path(leader.trial_dir) / "config.yaml"),
                    trial.number: (dict(trial.params), trial_dir / "config.yaml")}
        perfs: dict[int, list[dict]] = {n: [] for n in entrants}
        for i in range(rounds):
            for number, (params, config) in entrants.items():
                perf = self._repeat(params, config, trial_dir / f"race-{i}-trial-{number:04d}",
                                    marker=f"{self.settings.study}/race/{number}")
                if perf is not None:
                    perfs[number].append(perf)
        R.add_repeats(study, perfs, "race")
        return Performance.pool([result.summary.performance, *perfs[trial.number]])

    def _repeat(self, params: dict, config: Path, out_dir: Path, *, marker: str) -> dict | None:
        """One more run of a launched configuration; its performance layer, or None."""
        return rerun(config, out_dir, self.settings, marker=marker)

    def _reject(self, study: optuna.Study, trial: optuna.Trial, label: str, why: str,
                progress: SweepProgress, *, outcome: Outcome = Outcome.INFEASIBLE) -> Settled:
        scoring.tell_rejected(study, trial, why, budget_gib=self.budget_gib, outcome=outcome)
        progress.trial_done(trial.number, label, outcome, None, launched=False)
        return Settled(launched=False)

    def _baseline_verdict(self, trial: optuna.Trial, params: dict,
                          result: monitor.TrialResult) -> str | None:
        """The baseline ending config_error or crash ends the sweep, with its log tail."""
        if params != self.space.baseline or result.reason not in FATAL_FOR_BASELINE:
            return None
        tail = f"\n{result.log_tail}" if result.log_tail else ""
        return (f"stopped: the baseline (trial {trial.number}) ended {result.reason.value}: "
                f"{result.detail}; every other trial would fail the same way. Fix the "
                f"baseline, then run the same command again.{tail}")

    def _launch(self, trial: optuna.Trial, cfg: TrialConfig, label: str,
                progress: SweepProgress, placement: Placement, *,
                best: float | None) -> monitor.TrialResult:
        """Start the trial and follow it; ``best`` is the tokens/s the slow rule judges by.
        A trial lost to its node (SLURM: node failure, preemption) is started once more."""
        trial_dir = self.dir / f"trial-{trial.number:04d}"
        trial_dir.mkdir(parents=True, exist_ok=True)
        config_path = trial_dir / "config.yaml"
        config_path.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
        trial.set_user_attr(R.TRIAL_DIR, str(trial_dir))
        if placement.devices:
            trial.set_user_attr(R.PLACEMENT, placement.text())
        for attempt in (1, 2):
            marker = f"{self.settings.study}/{trial.number}/{time.time_ns()}"
            proc = self._start(config_path, trial_dir, marker, cfg, trial.number, placement)
            trial.set_user_attr(R.PROCESS, proc.record())
            result = self._follow(proc, trial, cfg, label, progress, trial_dir, best)
            if not result.retry:
                return result
            if attempt == 1:
                progress.note(f"trial {trial.number}: {result.detail}; starting it once more")
            else:
                result.detail = f"{result.detail}, twice: given up"
        return result

    def _start(self, config_path: Path, trial_dir: Path, marker: str, cfg: TrialConfig,
               number: int, placement: Placement):
        if self.slurm is not None:
            return self.slurm.start_trial(config_path, trial_dir, marker, cfg=cfg,
                                          trial_command=self.trial_command, number=number)
        return launcher.start_trial(config_path, trial_dir, marker,
                                    world_size=cfg.parallel.devices,
                                    trial_command=self.trial_command, placement=placement)

    def _follow(self, proc, trial: optuna.Trial, cfg: TrialConfig, label: str,
                progress: SweepProgress, trial_dir: Path, best: float | None
                ) -> monitor.TrialResult:
        last_beat = [time.time()]

        def on_tick(phase: str) -> None:
            self._check_stopping()
            progress.trial_phase(trial.number, label, phase)
            if time.time() - last_beat[0] >= self.settings.heartbeat_interval_s:
                trial.set_user_attr(R.HEARTBEAT, time.time())
                last_beat[0] = time.time()

        return monitor.watch(proc, trial_dir / cfg.run.metrics_path, trial_dir,
                             self.settings.stop,
                             on_step=lambda steps: self._slow_verdict(
                                 trial, steps, best, cfg.run.warmup_steps),
                             on_tick=on_tick)

    def _slow_verdict(self, trial: optuna.Trial, steps: list, best: float | None,
                      warmup_floor: int) -> str | None:
        """After each new step of a running trial: report it to Optuna; why to stop it as
        slow, or None."""
        if self.multi:
            return None  # a slow trial may still be on the memory side of the Pareto front
        tps, _, _ = pruning.estimate(steps, warmup_floor)
        if tps is not None:
            trial.report(tps, steps[-1].step)
        return pruning.slow_verdict(steps, best, self.settings.stop, warmup_floor)

    # -- the cost model -------------------------------------------------------------------
    def _predicted_over_budget(self, trial: optuna.Trial, cfg: TrialConfig, *,
                               exempt: bool) -> str | None:
        """Record the prediction; why the point is ruled out as predicted_oom, or None.

        The baseline is always launched (``exempt``): it is the user's own running
        configuration, and its measurement corrects a model calibrated elsewhere (another
        workload, another study) before the model rules anything out.
        """
        if self.model is None:
            return None
        prediction = self.model.predict_config(cfg)
        trial.set_user_attr(R.PREDICTION, prediction.record())
        margin = self.settings.predict.oom_margin
        if exempt or not self.settings.predict.rule_out_oom or \
                prediction.peak_gib <= self.budget_gib * (1 + margin):
            return None
        return (f"predicted peak {prediction.peak_gib:.2f} GiB > budget {self.budget_gib:g} GiB "
                f"x (1 + margin {margin:g}): {prediction.memory.explain(self.budget_gib)}")

    def _learn(self, study: optuna.Study, number: int) -> None:
        """Refit the constants when a measured OOM or a prediction off by more than the
        margin says the model is wrong (and at the first trials, to leave the priors)."""
        # Only the real trial program's measurements calibrate (not simulated or scripted).
        if self.model is None or not self.settings.predict.refit or self.trial_command:
            return
        with self._refit_lock:  # concurrent trials finish in threads of their own
            records = R.load_records(study)
            record = next(r for r in records if r.number == number)
            if learning.needs_refit(record, self.settings.predict.oom_margin) or \
                    self.model.constants.source.startswith("priors"):
                self.model.refit(learning.measurements(records, self.model, self._configs))

    # -- lost trials ----------------------------------------------------------------------
    def _reap(self, study: optuna.Study) -> list[int]:
        """Trials whose orchestrator is gone: kill their processes here, re-queue them."""
        host = reaping.worker_identity()["host"]
        reaped = []
        for trial in reaping.stale_trials(study, self.settings):
            killed = launcher.kill_recorded(trial.user_attrs.get(R.PROCESS), host)
            detail = (f"orchestrator gone; {killed} orphan process(es) killed; "
                      "configuration re-queued")
            if reaping.requeue(study, trial, Outcome.ORPHANED, detail):
                reaped.append(trial.number)
        return reaped
