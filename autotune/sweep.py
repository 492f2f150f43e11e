"""The sweep: ask -> check -> launch -> watch -> tell, until the launch budget is spent.

The loop is an outline over the pieces that own each concern: ``space``
(knobs), ``feasibility`` (rejections at zero cost), ``launcher`` + ``monitor``
(one trial process), ``scoring`` (what Optuna learns), ``study`` (storage,
resume, zombies).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState
from rich.console import Console

from autotune import feasibility, launcher, leaderboard, monitor, pruning, scoring
from autotune import records as R
from autotune import study as S
from autotune.progress import SweepProgress
from autotune.settings import Objective, SweepSettings
from autotune.space import SearchSpace
from trials.config import (
    ConfigError,
    TrialConfig,
    memory_budget_gib,
    micro_batch_size,
    to_trial_config,
)

log = logging.getLogger(__name__)

#: Proposals in a row that launch nothing (duplicates, rejections) before the sweep gives up.
MAX_IDLE_PROPOSALS = 200


@dataclass
class SweepOutcome:
    exit_code: int
    message: str
    study: optuna.Study | None = None


class Sweep:
    def __init__(self, composed: DictConfig, overrides: list[str], console: Console) -> None:
        self.settings: SweepSettings = OmegaConf.to_object(composed.sweep)
        self.search = OmegaConf.to_object(composed.search)
        self.console = console
        S.check_study_name(self.settings.study)
        self.space = SearchSpace.from_config(self.search, composed, overrides)
        self.base: TrialConfig = to_trial_config(composed)
        _, problem = feasibility.structural_problem(self.space, self.space.baseline)
        if problem:
            raise ConfigError(f"the baseline configuration is impossible: {problem}")
        self.budget_gib = memory_budget_gib(self.base)
        self.multi = self.settings.objective is Objective.pareto
        self.dir = S.study_dir(self.settings)

    def fingerprint_parts(self) -> dict:
        b = OmegaConf.structured(self.base)
        return {"search_space": self.space.describe(), "search_devices": self.space.devices,
                "workload": OmegaConf.to_container(b.workload),
                "hardware": OmegaConf.to_container(b.hardware),
                "measurement": {"run": {k: OmegaConf.to_container(b.run)[k]
                                        for k in ("warmup_steps", "measure_steps")},
                                "global_batch": self.base.train.global_batch,
                                "data": OmegaConf.to_container(b.data)}}

    # -- outline --------------------------------------------------------------------------
    def run(self) -> SweepOutcome:
        S.check_runs_dir(self.settings)
        storage = S.open_storage(self.settings, create=True)
        study = S.load_or_create(self.settings, storage, self.fingerprint_parts(),
                                  self.space.distributions())
        # What the report's diagnosis quotes: the stop rules the trials really ran under.
        study.set_user_attr(S.STOP_RULES, OmegaConf.to_container(
            OmegaConf.structured(self.settings.stop)))
        reaped = S.reap_zombies(study, self.settings)
        if reaped:
            self.console.print(f"reaped {len(reaped)} trial(s) left RUNNING by a stopped "
                               f"orchestrator: {reaped}; their configurations are re-queued")
        self._seed_queue(study)
        study.sampler = self._sampler(study)
        done = S.count_launches(study)
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
        self.console.print(leaderboard.render(records), highlight=False, soft_wrap=True)
        self.console.print(f"{message}\nstudy: {S.redact(S.storage_url(self.settings))} "
                           f"(name {self.settings.study}); runs: {self.dir}", highlight=False,
                           soft_wrap=True)
        failed = message.startswith("stopped:")
        return SweepOutcome(1 if failed else 0, message, study)

    def _loop(self, study: optuna.Study, progress: SweepProgress) -> str:
        idle = 0
        while True:
            launched = S.count_launches(study)
            if launched >= self.settings.n_trials:
                return f"done: {launched} trial(s) launched (budget {self.settings.n_trials})"
            stop = self._failure_rate_stop(study, launched)
            if stop:
                return stop
            if self._exhausted(study):
                return (f"search space exhausted: all {self.space.size} configurations are "
                        f"evaluated or ruled out ({launched} launched)")
            if idle >= MAX_IDLE_PROPOSALS:
                return (f"stopped early: the sampler proposed {idle} evaluated or infeasible "
                        "configurations in a row")
            ran = self._one_trial(study, progress)
            idle = 0 if ran else idle + 1

    # -- one proposal ---------------------------------------------------------------------
    def _one_trial(self, study: optuna.Study, progress: SweepProgress) -> bool:
        """Ask for a point and settle it; True when a process was launched."""
        self._queue_next_neighbour(study)
        trial = study.ask(self.space.distributions())
        params = dict(trial.params)
        label = leaderboard.params_label(params)
        trial.set_user_attr(R.WORKER, S.worker_identity())
        trial.set_user_attr(R.HEARTBEAT, time.time())
        if not self._claim_launch(study, trial):
            scoring.tell_rejected(study, trial, "the launch budget was spent by other workers",
                                  budget_gib=self.budget_gib, reason="budget")
            return False
        cfg, problem = feasibility.structural_problem(self.space, params)
        if problem:
            scoring.tell_rejected(study, trial, problem, budget_gib=self.budget_gib)
            progress.trial_done(trial.number, label, "infeasible", None, launched=False)
            return False
        trial.set_user_attr(R.MICRO_BATCH_SIZE, micro_batch_size(cfg))
        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                            TrialState.PRUNED, TrialState.FAIL))
        original = next((t for t in finished if t.params == params and R.evaluated(t)), None)
        if original is not None:
            scoring.tell_reused(study, trial, original, multi_objective=self.multi)
            progress.trial_done(trial.number, label, original.user_attrs.get(R.REASON, "?"),
                                original.values[0] if original.values else None, launched=False)
            return False
        oom = feasibility.oom_dominating(params, cfg, [R.TrialRecord.from_trial(t)
                                                       for t in finished])
        if oom is not None:
            scoring.tell_rejected(study, trial, f"trial {oom.number} ran out of memory at "
                                  f"micro-batch size {oom.micro_batch_size}; this one needs "
                                  f"{micro_batch_size(cfg)}", budget_gib=self.budget_gib)
            progress.trial_done(trial.number, label, "infeasible", None, launched=False)
            return False
        result = self._launch(study, trial, cfg, label, progress)
        state = scoring.tell(study, trial, result, budget_gib=self.budget_gib,
                             multi_objective=self.multi)
        tps = (result.summary or {}).get("performance", {}).get("tokens_per_s")
        progress.trial_done(trial.number, label, result.reason,
                            tps if state is TrialState.COMPLETE else None, launched=True)
        return True

    def _launch(self, study: optuna.Study, trial: optuna.Trial, cfg: TrialConfig, label: str,
                progress: SweepProgress) -> monitor.TrialResult:
        trial_dir = self.dir / f"trial-{trial.number:04d}"
        trial_dir.mkdir(parents=True, exist_ok=True)
        config_path = trial_dir / "config.yaml"
        config_path.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
        marker = f"{self.settings.study}/{trial.number}/{time.time_ns()}"
        argv = launcher.trial_argv(config_path, cfg.parallel.devices, self.settings.trial_command,
                                   trial_dir)
        trial.set_user_attr(R.TRIAL_DIR, str(trial_dir))
        proc = launcher.start(argv, trial_dir, marker)
        trial.set_user_attr(R.PROCESS, {"host": S.worker_identity()["host"], "pgid": proc.pgid,
                                        "marker": marker})
        best = self._best(study)
        last_beat = [time.time()]

        def on_step(steps: list[dict]) -> str | None:
            if self.multi:
                return None  # a slow trial may still be on the memory side of the Pareto front
            tps, _, _ = pruning.estimate(steps)
            if tps is not None:
                trial.report(tps, steps[-1]["step"])
            return pruning.slow_verdict(steps, best, self.settings.stop)

        def on_tick(phase: str) -> None:
            progress.trial_phase(trial.number, label, phase)
            if time.time() - last_beat[0] >= self.settings.heartbeat_interval_s:
                trial.set_user_attr(R.HEARTBEAT, time.time())
                last_beat[0] = time.time()

        return monitor.watch(proc, trial_dir / cfg.run.metrics_path, trial_dir,
                             self.settings.stop, on_step=on_step, on_tick=on_tick)

    # -- helpers --------------------------------------------------------------------------
    def _seed_queue(self, study: optuna.Study) -> None:
        """Trial 0 is the baseline."""
        if not study.get_trials(deepcopy=False):
            study.enqueue_trial(self.space.baseline, user_attrs={R.ROLE: "baseline"})

    def _queue_next_neighbour(self, study: optuna.Study) -> None:
        """With sweep.neighbours, the one-knob changes of the baseline come before sampling.

        Queued one at a time, only when nothing else waits, so that retries of
        orphaned trials go first and a resume picks up where it stopped.
        """
        if not self.settings.neighbours:
            return
        trials = study.get_trials(deepcopy=False)
        if any(t.state is TrialState.WAITING for t in trials):
            return
        seen = [t.params for t in trials] + [t.system_attrs.get("fixed_params") for t in trials]
        for point in self.space.neighbours():
            if point not in seen:
                study.enqueue_trial(point, user_attrs={R.ROLE: "neighbour"})
                return

    def _sampler(self, study: optuna.Study) -> optuna.samplers.BaseSampler:
        # A fixed seed would re-propose the same first points after a resume.
        seed = self.settings.seed + len(study.get_trials(deepcopy=False))
        return optuna.samplers.TPESampler(seed=seed,
                                          n_startup_trials=self.settings.n_startup_trials)

    def _claim_launch(self, study: optuna.Study, trial: optuna.Trial) -> bool:
        """Claim one launch of the budget through the storage (other workers may share it).

        Claimed right after ``ask`` and released when the point is ruled out or reused.
        Lower trial numbers win: a worker whose claim would pass n_trials, counting only
        the claims of earlier trials, backs off.
        """
        trial.set_user_attr(R.LAUNCHED, True)
        earlier = sum(1 for t in study.get_trials(deepcopy=False)
                      if t.number < trial.number and R.counts_as_launch(t))
        if earlier < self.settings.n_trials:
            return True
        trial.set_user_attr(R.LAUNCHED, False)
        return False

    def _best(self, study: optuna.Study) -> float | None:
        values = [t.values[0] for t in study.get_trials(deepcopy=False,
                                                        states=(TrialState.COMPLETE,))
                  if t.values and all(v <= 0 for v in t.constraints.values())]
        return max(values) if values else None

    def _failure_rate_stop(self, study: optuna.Study, launched: int) -> str | None:
        s = self.settings
        if launched < s.min_trials_for_failure_rate:
            return None
        failed = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
                     if R.counts_as_launch(t))
        if failed / launched > s.max_failure_rate:
            return (f"stopped: {failed} of {launched} launched trials failed "
                    f"(crash/hang/timeout), "
                    f"above sweep.max_failure_rate={s.max_failure_rate:g}; see the log tails "
                    f"in {self.dir}/trial-*/stderr.log")
        return None

    def _exhausted(self, study: optuna.Study) -> bool:
        seen = {json.dumps(t.params, sort_keys=True, default=str)
                for t in study.get_trials(deepcopy=False) if R.evaluated(t)}
        return len(seen) >= self.space.size
