"""The launch budget and the study-wide questions the sweep asks before each proposal.

``sweep.n_trials`` counts real launches across resumes and workers. A launch is
claimed under the study's launch lock right before the process starts, so
several workers (threads, processes, machines) on one study spend exactly the
budget and never launch a configuration that is already running elsewhere.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.settings import SweepSettings
from autotune.study.claims import launch_lock
from autotune.study.records import LAUNCHED, counts_as_launch, evaluated, outcome_of
from autotune.study.result import TrialResult
from autotune.study.surviving import SurvivingStorage
from autotune.study.sweep_end import EndKind, SweepEnd
from trials.contract.outcomes import Outcome

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def count_launches(study: optuna.Study) -> int:
    """Real launches so far (all workers); lost ones (orphaned, interrupted) are retried."""
    return sum(1 for t in study.get_trials(deepcopy=False) if counts_as_launch(t))


@dataclass(frozen=True)
class Claim:
    """What a launch claim came to: granted, the budget spent, or the same configuration
    already running (``twin``: its trial number; wait for it and reuse its result)."""

    granted: bool
    twin: int | None = None


def claim_launch(study: optuna.Study, trial: optuna.Trial, params: dict, n_trials: int,
                 storage: SurvivingStorage, study_name: str) -> Claim:
    """Claim one launch of the budget for ``trial``, atomically across workers.

    Under the study's launch lock (:mod:`autotune.study.claims`): the budget counts
    every other live claim, and a configuration already launched (running, or finished
    with a result that stands) is not launched again. The claim is the ``launched``
    attribute, written inside the lock. A database lost meanwhile is waited out and the
    whole claim made again (``storage.outage``).
    """
    return storage.outage.call(_claim, study, trial, params, n_trials, storage, study_name)


def _claim(study: optuna.Study, trial: optuna.Trial, params: dict, n_trials: int,
           storage: SurvivingStorage, study_name: str) -> Claim:
    with launch_lock(storage.url, study_name,
                     connect_args=storage.engine_kwargs.get("connect_args")):
        trials = study.get_trials(deepcopy=False)
        others = [t for t in trials if t.number != trial.number]
        # Running elsewhere, or finished since this worker looked for a result to reuse
        # (outside the lock): either way, wait for it / reuse it, never launch it again.
        twin = next((t for t in others if t.params == params and t.user_attrs.get(LAUNCHED)
                     and (t.state is TrialState.RUNNING or evaluated(t))), None)
        if twin is not None:
            return Claim(granted=False, twin=twin.number)
        if sum(1 for t in others if counts_as_launch(t)) >= n_trials:
            return Claim(granted=False)
        trial.set_user_attr(LAUNCHED, True)
        return Claim(granted=True)


def budget_spent(study: optuna.Study, n_trials: int) -> bool:
    """Every launch of the budget is claimed (a quick look, without the lock)."""
    return count_launches(study) >= n_trials


def wait_for(study: optuna.Study, number: int, *, poll_s: float = 1.0,
             should_stop=lambda: None) -> FrozenTrial:
    """Block until trial ``number`` (running elsewhere) finishes; the finished trial.
    ``should_stop`` is called each poll (it raises to abandon the wait)."""
    while True:
        trial = study.get_trials(deepcopy=False)[number]
        if trial.state.is_finished():
            return trial
        should_stop()
        time.sleep(poll_s)


def failed_launches(study: optuna.Study) -> int:
    """Launches that taught nothing (crash, hang, timeout)."""
    return sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
               if counts_as_launch(t) and (o := outcome_of(t)) is not None and o.is_failure)


def failure_rate_verdict(study: optuna.Study, launched: int, settings: SweepSettings,
                         study_dir: Path) -> SweepEnd | None:
    """Why the sweep must stop: more than ``sweep.max_failure_rate`` of launches failed."""
    if launched < settings.min_trials_for_failure_rate:
        return None
    failed = failed_launches(study)
    if failed / launched <= settings.max_failure_rate:
        return None
    return SweepEnd.stopped(
        f"stopped: {failed} of {launched} launched trials failed (crash/hang/timeout), above "
        f"sweep.max_failure_rate={settings.max_failure_rate:g}; see the log tails in "
        f"{study_dir}/trial-*/stderr.log")


def evaluated_result(trials: list[FrozenTrial], params: dict) -> FrozenTrial | None:
    """A finished trial with exactly these params whose result stands (to reuse)."""
    return next((t for t in trials if t.state in FINISHED and t.params == params
                 and evaluated(t)), None)


def n_evaluated_points(study: optuna.Study) -> int:
    """Distinct configurations already evaluated or ruled out."""
    seen = {json.dumps(t.params, sort_keys=True, default=str)
            for t in study.get_trials(deepcopy=False) if evaluated(t)}
    return len(seen)


def end_verdict(study: optuna.Study, idle: int, settings: SweepSettings, space_size: int,
                study_dir: Path, *, max_idle: int) -> SweepEnd | None:
    """Why the sweep ends before its next proposal (budget spent, too many failures, the
    space exhausted, the sampler proposing nothing new), or None."""
    launched = count_launches(study)
    if launched >= settings.n_trials:
        return SweepEnd(EndKind.DONE,
                        f"done: {launched} trial(s) launched (budget {settings.n_trials})")
    stop = failure_rate_verdict(study, launched, settings, study_dir)
    if stop:
        return stop
    if n_evaluated_points(study) >= space_size:
        return SweepEnd(EndKind.EXHAUSTED, f"search space exhausted: all {space_size} "
                        f"configurations are evaluated or ruled out ({launched} launched)")
    if idle >= max_idle:
        return SweepEnd(EndKind.IDLE, f"stopped early: the sampler proposed {idle} evaluated "
                        "or infeasible configurations in a row")
    return None


def any_settled_launch(study: optuna.Study, besides: int) -> bool:
    """Has any launch other than trial ``besides`` ended (or is the study new)?"""
    return any(outcome_of(t) is not None for t in study.get_trials(deepcopy=False)
               if t.user_attrs.get(LAUNCHED) and t.number != besides)


#: Outcomes of the baseline that end the sweep: the rest would fail the same way.
FATAL_FOR_BASELINE = (Outcome.CONFIG_ERROR, Outcome.CRASH)


#: Signals that come from outside a trial (a user, a scheduler, the kernel's OOM killer is
#: told apart by memory_evidence): a baseline they end is not the workload's fault.
EXTERNAL_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def fatal_baseline(number: int, result: TrialResult) -> SweepEnd | None:
    """Why the sweep ends when its baseline (trial ``number``) ended config_error or crash,
    with its log tail; None otherwise."""
    if result.reason not in FATAL_FOR_BASELINE:
        return None
    tail = f"\n{result.log_tail}" if result.log_tail else ""
    code = result.exit_code
    if result.reason is Outcome.CRASH and code is not None and code < 0 and \
            -code in EXTERNAL_SIGNALS:
        return SweepEnd.stopped(
            f"stopped: the baseline (trial {number}) was stopped from outside: "
            f"{result.detail}. Nothing says the workload failed, but the other trials would "
            "be compared with no baseline; find what sent the signal (a user, the scheduler, "
            "dmesg), then start again with a new sweep.study.")
    return SweepEnd.stopped(
        f"stopped: the baseline (trial {number}) ended {result.reason.value}: "
        f"{result.detail}; every other trial would fail the same way. Fix the baseline, "
        f"then run the same command again.{tail}")
