"""The one follow loop: read a running trial's records live, enforce the stop rules,
classify the end. Nothing else watches a trial.

The monitor decides from structured signals only: the records the trial writes,
its exit code, what its runner saw (a SLURM job's state) and its own clocks. Free
text (stderr) is kept for the human, never parsed. What varies between callers comes
in as :class:`Clocks` (the sweep's stop rules, or a soak's limits for a long run) and
:class:`Hooks` (the slow rule, progress and heartbeats, a soak's kill).

    result = monitor.run(runner, job, Clocks.of(settings.stop), hooks=Hooks(...))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autotune.running.conditions import ConditionsMeter
from autotune.running.devices import UNPLACED, Placement
from autotune.running.job import Runner, RunningTrial, TrialJob
from autotune.running.memory_evidence import KernelOOMKills, unexplained_end
from autotune.settings import StopRules
from autotune.study.result import TrialResult
from trials.contract.events import (
    EndRecord,
    Phase,
    ProfileRecord,
    Record,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.outcomes import Outcome

POLL_S = 0.2
#: Seconds a trial may take to exit after its end event before it is stopped: its
#: outcome is written, and msrun's ranks take ~5 s to leave the cluster (measured in
#: bench/landscape_record.py's runs), time that is the trial's cost but not its data.
EXIT_GRACE_S = 1.0
#: SIGTERM-to-SIGKILL grace when nothing is left to save (the outcome is known, or the
#: trial is slow): msrun's clean-up after SIGTERM took up to 4 s of a trial's time.
QUICK_KILL_S = 0.3


@dataclass(frozen=True)
class Clocks:
    """When the follow loop stops a trial by the clock, and how often it looks.

    Every time it judges is elapsed time on the trial's own clock (``RunningTrial.now``):
    the monotonic clock for a real trial, so that a step of the wall clock (NTP) neither
    kills a healthy trial as hung nor spares a hung one; virtual seconds in the tests.
    """

    wall_s: float
    compile_s: float
    step_s: float
    poll_s: float = POLL_S
    #: How long a trial may take to exit once its end record is written.
    exit_grace_s: float = EXIT_GRACE_S

    @classmethod
    def of(cls, rules: StopRules) -> Clocks:
        return cls(wall_s=rules.wall_timeout_s, compile_s=rules.compile_timeout_s,
                   step_s=rules.step_timeout_s)

    def verdict(self, now: float, started: float, last_progress: float, any_step: bool
                ) -> tuple[Outcome, str] | None:
        if now - started > self.wall_s:
            return Outcome.TIMEOUT, f"ran past the wall-clock cap of {self.wall_s:g} s"
        if not any_step and now - started > self.compile_s:
            return Outcome.HANG, (f"no step finished within the compile budget of "
                                  f"{self.compile_s:g} s")
        if any_step and now - last_progress > self.step_s:
            return Outcome.HANG, f"no step progress for {self.step_s:g} s"
        return None


@dataclass
class Hooks:
    """What a caller adds to the follow loop; every hook is optional."""

    #: After each new step, with the steps so far: a reason to stop it as slow, or None.
    step: Callable[[list[StepRecord]], str | None] | None = None
    #: Every poll, with the trial's phase ("queued", "starting", "compile", ...); may raise
    #: (the orchestrator was told to stop) to take the trial down.
    tick: Callable[[str], None] | None = None
    #: Every record as it is read (a soak follows checkpoints and progress through it).
    record: Callable[[Record], None] | None = None
    #: After each read: a reason to SIGKILL the whole trial now, or None (a soak's drill).
    kill: Callable[[], str | None] | None = None


def current_phase(steps: list[StepRecord], started: bool) -> str:
    if not started:
        return "starting"
    if not steps:
        return Phase.COMPILE.value
    return steps[-1].phase.value


def run(runner: Runner, job: TrialJob, clocks: Clocks, *, placement: Placement = UNPLACED,
        hooks: Hooks | None = None, on_start: Callable[[RunningTrial], None] | None = None,
        on_retry: Callable[[TrialResult], None] | None = None) -> TrialResult:
    """Start ``job`` and follow it to its end. A trial lost to its node (SLURM: node
    failure, preemption) is started once more; lost twice, it is a crash. The host's
    conditions over its measured steps come with the result (``conditions``)."""
    for attempt in (1, 2):
        trial = runner.start(job, placement)
        if on_start is not None:
            on_start(trial)
        result = watch(trial, clocks, hooks, meter=ConditionsMeter(trial.marker, placement))
        if not result.retry:
            return result
        if attempt == 1 and on_retry is not None:
            on_retry(result)
    result.detail = f"{result.detail}, twice: given up"
    return result


def watch(trial: RunningTrial, clocks: Clocks, hooks: Hooks | None = None, *,
          meter: ConditionsMeter | None = None) -> TrialResult:
    """Follow the trial until it exits, a stop rule or a hook ends it; ``meter`` sees
    every record and poll (it only observes) and its conditions come with the result.

    If the orchestrator itself is interrupted (SIGINT, SIGTERM, or a hook raising), every
    process of the trial goes too before the interruption propagates.
    """
    try:
        return _watch(trial, clocks, hooks or Hooks(), meter)
    except BaseException:
        trial.stop()
        raise


class _Follower:
    """What the trial has said so far."""

    def __init__(self, trial: RunningTrial, hooks: Hooks,
                 meter: ConditionsMeter | None = None) -> None:
        self.trial = trial
        self.hooks = hooks
        self.meter = meter
        self.start: StartRecord | None = None
        self.steps: list[StepRecord] = []
        self.summary: SummaryRecord | None = None
        self.profile: ProfileRecord | None = None
        self.end: EndRecord | None = None
        self.slow: str | None = None

    def read(self) -> bool:
        """Take in new records; True when a step arrived."""
        progressed = False
        for record in self.trial.read():
            if self.hooks.record is not None:
                self.hooks.record(record)
            if self.meter is not None:
                self.meter.record(record)
            if isinstance(record, StartRecord):
                self.start = record
            elif isinstance(record, StepRecord):
                self.steps.append(record)
                progressed = True
                if self.hooks.step is not None and self.slow is None:
                    self.slow = self.hooks.step(self.steps)
            elif isinstance(record, SummaryRecord):
                self.summary = record
            elif isinstance(record, ProfileRecord):
                self.profile = record
            elif isinstance(record, EndRecord):
                self.end = record
        return progressed


def _watch(trial: RunningTrial, clocks: Clocks, hooks: Hooks,
           meter: ConditionsMeter | None = None) -> TrialResult:
    follow = _Follower(trial, hooks, meter)
    kernel_kills = KernelOOMKills.now()  # evidence, should it end without an outcome
    last_progress = trial.started
    stop: tuple[Outcome, str] | None = None
    killed: str | None = None
    ended: float | None = None  # when the end event was first seen
    submitted = trial.now()
    while True:
        exited = trial.poll() is not None  # before reading: what it flushed is read
        now = trial.now()
        if trial.started is None and not exited:  # queued (SLURM): no clock runs yet
            if hooks.tick is not None:
                hooks.tick("queued")
            trial.wait(clocks.poll_s)
            continue
        last_progress = last_progress or trial.started or now
        if follow.read():
            last_progress = now
        if meter is not None:
            meter.sample()
        if hooks.kill is not None and not exited:
            killed = hooks.kill()
            if killed:
                trial.kill()
                break
        if exited:
            break
        stop = ((Outcome.SLOW, follow.slow) if follow.slow else
                clocks.verdict(now, trial.started, last_progress, bool(follow.steps)))
        if stop is not None:
            if meter is not None:
                meter.close()  # while its processes still run: their CPU is theirs
            # Nothing of a slow trial is kept: msrun's own SIGTERM clean-up is not waited for.
            trial.stop(QUICK_KILL_S if stop[0] is Outcome.SLOW else 2.0)
            break
        if follow.end is not None:
            ended = ended or now
            if now - ended > clocks.exit_grace_s:  # the outcome is known: skip the teardown
                trial.stop(QUICK_KILL_S)
                break
        if hooks.tick is not None:
            hooks.tick(current_phase(follow.steps, follow.start is not None))
        trial.wait(clocks.poll_s)
    follow.read()  # what was flushed just before the exit
    conditions = meter.finish() if meter is not None else None
    # A trial that exited by itself may have left children (dataset workers, msrun ranks).
    trial.cleanup()
    exit_code = trial.poll()
    runner_verdict = None if killed else trial.verdict()
    reason, detail = _classify(stop, follow, exit_code, runner_verdict)
    if _unexplained(stop, follow, runner_verdict, reason):
        reason, detail = unexplained_end(exit_code, who=trial.program, start=follow.start,
                                         steps=follow.steps,
                                         kernel_kills=kernel_kills.since(),
                                         log_tail=trial.log_tail())
    if killed:
        reason, detail = Outcome.CRASH, killed
    retry = (stop is None and not killed and follow.end is None
             and runner_verdict is not None and runner_verdict[2])
    result = TrialResult(reason=reason, detail=detail, summary=follow.summary,
                         steps=follow.steps, start=follow.start, exit_code=exit_code,
                         wall_s=trial.now() - (trial.started or submitted),
                         profile=follow.profile, retry=retry, killed=bool(killed),
                         conditions=conditions)
    if reason not in (Outcome.OK, Outcome.SLOW) and not killed:
        result.log_tail = trial.log_tail()
    return result


def _unexplained(stop: tuple[Outcome, str] | None, follow: _Follower,
                 runner_verdict: tuple[Outcome, str, bool] | None, reason: Outcome) -> bool:
    """It ended by itself without an end record and without an exit code of the trial
    program's outcomes (1, or a signal): whether memory ran out is a matter of evidence."""
    return (stop is None and follow.end is None and runner_verdict is None
            and reason is Outcome.CRASH)


def _classify(stop: tuple[Outcome, str] | None, follow: _Follower, exit_code: int | None,
              runner_verdict: tuple[Outcome, str, bool] | None = None
              ) -> tuple[Outcome, str]:
    """Our own stop first, then the trial's end record, then what the runner saw (SLURM:
    out of memory, time limit, node failure, cancelled), then the exit code."""
    if stop is not None:
        return stop
    if follow.end is None and runner_verdict is not None:
        return runner_verdict[0], runner_verdict[1]
    if follow.end is not None:
        reason, detail = follow.end.outcome, follow.end.reason
    else:
        reason = Outcome.from_exit_code(exit_code)
        detail = f"exited with code {exit_code} without an end event"
    if reason is Outcome.OK and follow.summary is None:
        return Outcome.CRASH, "ended ok without a summary"
    return reason, detail
