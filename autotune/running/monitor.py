"""Watch one running trial: read its metrics live, enforce the stop rules, classify the end.

The monitor decides from structured signals only: records in the metrics file,
the exit code, and its own clocks. Free text (stderr) is kept for the human,
never parsed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from autotune.settings import StopRules
from trials.contract.events import (
    EndRecord,
    Phase,
    ProfileRecord,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.metrics import MetricsReader
from trials.contract.outcomes import Outcome

POLL_S = 0.2
#: Seconds a trial may take to exit after its end event before it is stopped: its
#: outcome is written, and msrun's ranks take ~5 s to leave the cluster (measured in
#: bench/landscape_record.py's runs), time that is the trial's cost but not its data.
EXIT_GRACE_S = 1.0
#: SIGTERM-to-SIGKILL grace when nothing is left to save (the outcome is known, or the
#: trial is slow): msrun's clean-up after SIGTERM took up to 4 s of a trial's time.
QUICK_KILL_S = 0.3


@dataclass
class TrialResult:
    """How a launched trial ended."""

    reason: Outcome
    detail: str = ""
    summary: SummaryRecord | None = None
    steps: list[StepRecord] = field(default_factory=list)
    start: StartRecord | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    log_tail: str = ""
    #: run.profile_steps > 0: where the profiled steps' time went.
    profile: ProfileRecord | None = None
    #: Lost to its node (failure, preemption), not to its configuration: worth one retry.
    retry: bool = False


class RunningTrial(Protocol):
    """A launched trial as the monitor follows it, whatever launched it: a local
    :class:`~autotune.running.launcher.TrialProcess` or a
    :class:`~autotune.running.slurm.SlurmTrial`."""

    marker: str
    started: float | None  # None while queued

    def poll(self) -> int | None: ...
    def stop(self, grace_s: float = 2.0) -> None: ...
    def cleanup(self) -> None: ...
    def verdict(self) -> tuple[Outcome, str, bool] | None: ...


#: Called after each new step with the steps so far; returns a reason to stop as slow, or None.
StepHook = Callable[[list[StepRecord]], str | None]


def log_tail(trial_dir: Path, lines: int = 20) -> str:
    chunks = []
    for name in ("stderr.log", "stdout.log"):
        try:
            text = (trial_dir / name).read_text(errors="replace").splitlines()
        except OSError:
            continue
        if text:
            chunks.append(f"--- {name}\n" + "\n".join(text[-lines:]))
    return "\n".join(chunks)[-4000:]


def current_phase(steps: list[StepRecord], started: bool) -> str:
    if not started:
        return "starting"
    if not steps:
        return Phase.COMPILE.value
    return steps[-1].phase.value


def watch(proc: RunningTrial, metrics_path: Path, trial_dir: Path, rules: StopRules,
          *, on_step: StepHook | None = None, on_tick: Callable[[str], None] | None = None,
          ) -> TrialResult:
    """Follow the trial until it exits or a stop rule kills it.

    If the orchestrator itself is interrupted (SIGINT, SIGTERM), every process of the
    trial goes too before the interruption propagates.
    """
    try:
        return _watch(proc, metrics_path, trial_dir, rules, on_step, on_tick)
    except BaseException:
        proc.stop()
        raise


class _Follower:
    """What the metrics file has said so far."""

    def __init__(self, metrics_path: Path, on_step: StepHook | None) -> None:
        self.reader = MetricsReader(metrics_path)
        self.on_step = on_step
        self.start: StartRecord | None = None
        self.steps: list[StepRecord] = []
        self.summary: SummaryRecord | None = None
        self.profile: ProfileRecord | None = None
        self.end: EndRecord | None = None
        self.slow: str | None = None

    def read(self) -> bool:
        """Take in new records; True when a step arrived."""
        progressed = False
        for record in self.reader.read_new():
            if isinstance(record, StartRecord):
                self.start = record
            elif isinstance(record, StepRecord):
                self.steps.append(record)
                progressed = True
                if self.on_step is not None and self.slow is None:
                    self.slow = self.on_step(self.steps)
            elif isinstance(record, SummaryRecord):
                self.summary = record
            elif isinstance(record, ProfileRecord):
                self.profile = record
            elif isinstance(record, EndRecord):
                self.end = record
        return progressed


def _watch(proc: RunningTrial, metrics_path: Path, trial_dir: Path, rules: StopRules,
           on_step: StepHook | None, on_tick: Callable[[str], None] | None) -> TrialResult:
    follow = _Follower(metrics_path, on_step)
    last_progress = proc.started
    stop: tuple[Outcome, str] | None = None
    ended: float | None = None  # when the end event was first seen
    submitted = time.time()
    while proc.poll() is None:
        now = time.time()
        if proc.started is None:  # queued (SLURM): the stop rules' clocks have not started
            if on_tick is not None:
                on_tick("queued")
            time.sleep(POLL_S)
            continue
        last_progress = last_progress or proc.started
        if follow.read():
            last_progress = now
        stop = ((Outcome.SLOW, follow.slow) if follow.slow else
                _clock_verdict(now, proc.started, last_progress, bool(follow.steps), rules))
        if stop is not None:
            # Nothing of a slow trial is kept: msrun's own SIGTERM clean-up is not waited for.
            proc.stop(QUICK_KILL_S if stop[0] is Outcome.SLOW else 2.0)
            break
        if follow.end is not None:
            ended = ended or now
            if now - ended > EXIT_GRACE_S:  # the outcome is known: do not wait for teardown
                proc.stop(QUICK_KILL_S)
                break
        if on_tick is not None:
            on_tick(current_phase(follow.steps, follow.start is not None))
        time.sleep(POLL_S)
    follow.read()  # what was flushed just before the exit
    # A trial that exited by itself may have left children (dataset workers, msrun ranks).
    proc.cleanup()
    exit_code = proc.poll()
    launcher_verdict = proc.verdict()
    reason, detail = _classify(stop, follow, exit_code, launcher_verdict)
    retry = (stop is None and follow.end is None and launcher_verdict is not None
             and launcher_verdict[2])
    result = TrialResult(reason=reason, detail=detail, summary=follow.summary,
                         steps=follow.steps, start=follow.start, exit_code=exit_code,
                         wall_s=time.time() - (proc.started or submitted),
                         profile=follow.profile, retry=retry)
    if reason not in (Outcome.OK, Outcome.SLOW):
        result.log_tail = log_tail(trial_dir)
    return result


def _classify(stop: tuple[Outcome, str] | None, follow: _Follower, exit_code: int | None,
              launcher_verdict: tuple[Outcome, str, bool] | None = None
              ) -> tuple[Outcome, str]:
    """Our own stop first, then the trial's end record, then what the launcher saw (SLURM:
    out of memory, time limit, node failure, cancelled), then the exit code."""
    if stop is not None:
        return stop
    if follow.end is None and launcher_verdict is not None:
        return launcher_verdict[0], launcher_verdict[1]
    if follow.end is not None:
        reason, detail = follow.end.outcome, follow.end.reason
    else:
        reason = Outcome.from_exit_code(exit_code)
        detail = f"exited with code {exit_code} without an end event"
    if reason is Outcome.OK and follow.summary is None:
        return Outcome.CRASH, "ended ok without a summary"
    return reason, detail


def _clock_verdict(now: float, started: float, last_progress: float, any_step: bool,
                   rules: StopRules) -> tuple[Outcome, str] | None:
    if now - started > rules.wall_timeout_s:
        return Outcome.TIMEOUT, f"ran past the wall-clock cap of {rules.wall_timeout_s:g} s"
    if not any_step and now - started > rules.compile_timeout_s:
        return Outcome.HANG, (f"no step finished within the compile budget of "
                              f"{rules.compile_timeout_s:g} s")
    if any_step and now - last_progress > rules.step_timeout_s:
        return Outcome.HANG, f"no step progress for {rules.step_timeout_s:g} s"
    return None
