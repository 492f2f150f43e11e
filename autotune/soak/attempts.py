"""The launches of a soak: follow a production run, kill it with SIGKILL between two
checkpoints, resume it, and stitch the launches into one run."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autotune.running import monitor
from autotune.running.job import Runner, TrialJob
from autotune.running.monitor import Clocks, Hooks
from autotune.settings import SweepSettings
from autotune.soak import stability
from autotune.soak.plan import SoakPlan
from autotune.study.conditions import Conditions
from autotune.study.schema.soak import Launch, ResumeCheck
from trials.contract.events import (
    CheckpointRecord,
    EndRecord,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.outcomes import Outcome
from trials.contract.trial_dir import TrialDir
from trials.contract.units import rate

#: How often the run's metrics are read: a tiny model steps every ~30 ms, and the kill
#: should land between two checkpoints.
POLL_S = 0.01
#: Seconds a run may take to exit after its end event before it is stopped.
EXIT_GRACE_S = 2.0


# -- one launch -----------------------------------------------------------------------------
@dataclass
class Attempt:
    """One launch of the production run: what its part of the metrics file said."""

    index: int
    start_step: int | None = None
    steps: list[StepRecord] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    summary: bool = False
    end: EndRecord | None = None
    outcome: Outcome | None = None
    detail: str = ""
    killed: bool = False
    #: Steps done and latest checkpoint when the kill was sent.
    kill_done: int | None = None
    kill_checkpoint: int | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    first_step_s: float | None = None
    log_tail: str = ""
    #: What other processes did to the host over the launch (None: not measured here).
    conditions: Conditions | None = None

    @property
    def done(self) -> int:
        """Steps done in all (the last step's number + 1; its start step before any)."""
        if self.steps:
            return self.steps[-1].step + 1
        return self.start_step or 0

    def take(self, record, started: float) -> StepRecord | None:
        if isinstance(record, StartRecord):
            self.start_step = record.start_step
        elif isinstance(record, StepRecord):
            if self.first_step_s is None:
                self.first_step_s = time.monotonic() - started
            self.steps.append(record)
            return record
        elif isinstance(record, CheckpointRecord):
            self.checkpoints.append(record.step)
        elif isinstance(record, SummaryRecord):
            self.summary = True
        elif isinstance(record, EndRecord):
            self.end = record
        return None

    def launch(self) -> Launch:
        """The launch as the soak's result keeps it."""
        return Launch(index=self.index, start_step=self.start_step,
                      first_step=self.steps[0].step if self.steps else None,
                      last_step=self.steps[-1].step if self.steps else None,
                      steps=len(self.steps), checkpoints=list(self.checkpoints),
                      outcome=self.outcome.value if self.outcome else None,
                      detail=self.detail, killed=self.killed, kill_done=self.kill_done,
                      kill_checkpoint=self.kill_checkpoint, exit_code=self.exit_code,
                      wall_s=round(self.wall_s, 2),
                      first_step_s=(round(self.first_step_s, 2) if self.first_step_s
                                    else None),
                      log_tail=self.log_tail)


def clocks_for(plan: SoakPlan, settings: SweepSettings) -> Clocks:
    """When the soak stops a run itself: a long run is not a trial, so the sweep's wall cap
    is scaled to the planned steps. The run is looked at every POLL_S, so that the kill
    lands between two checkpoints."""
    stop = settings.stop
    step_s = plan.step_s or 1.0
    return Clocks(compile_s=stop.compile_timeout_s, step_s=max(stop.step_timeout_s, 20 * step_s),
                  wall_s=max(stop.wall_timeout_s,
                             stop.compile_timeout_s + 3 * plan.steps * step_s + 60),
                  poll_s=POLL_S, exit_grace_s=EXIT_GRACE_S)


def end_line(path: Path) -> None:
    """A SIGKILLed writer may leave a half-written last line: end it, so the resumed run's
    first record starts a line of its own (the reader skips the torn one)."""
    try:
        with open(path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
    except FileNotFoundError:
        pass


def should_kill(done: int, latest_checkpoint: int | None, plan: SoakPlan) -> bool:
    """Past the kill point, a checkpoint on disk, and at least ``replay`` steps past the
    last checkpoint the trainer writes (it saves right after each multiple of the interval:
    judged by the step count, not by the record, which may trail the save)."""
    return (plan.kill_from is not None and plan.kill_from <= done < plan.steps
            and latest_checkpoint is not None
            and done % plan.checkpoint_every >= plan.replay)


def run_attempt(index: int, plan: SoakPlan, run_dir: TrialDir, runner: Runner, clocks: Clocks,
                *, kill: bool, checkpoints: list[int],
                on_step: Callable[[Attempt, StepRecord], None]) -> Attempt:
    """Launch the run (resuming from the latest checkpoint) and follow it to its end, or
    kill it with SIGKILL at the planned point when ``kill``."""
    job = TrialJob.of(run_dir, f"soak/{plan.trial}", tuple(plan.overrides), fresh=index == 0)
    attempt = Attempt(index=index)
    launched = time.monotonic()

    def record(r) -> None:
        if attempt.take(r, launched) is not None:
            on_step(attempt, attempt.steps[-1])

    def kill_now() -> str | None:
        latest = max([*checkpoints, *attempt.checkpoints, attempt.start_step or 0]) or None
        if not (kill and should_kill(attempt.done, latest, plan)):
            return None
        attempt.killed, attempt.kill_done, attempt.kill_checkpoint = True, attempt.done, latest
        return f"killed with SIGKILL by the soak after step {attempt.done - 1}"

    result = monitor.run(runner, job, clocks, hooks=Hooks(record=record, kill=kill_now))
    end_line(job.metrics)  # a SIGKILLed writer may have torn its last line
    attempt.exit_code, attempt.wall_s = result.exit_code, result.wall_s
    attempt.outcome, attempt.detail = result.reason, result.detail
    attempt.conditions = result.conditions
    _classify(attempt, plan)
    if not attempt.killed and attempt.outcome is not Outcome.OK:
        attempt.log_tail = result.log_tail
    return attempt


def _classify(attempt: Attempt, plan: SoakPlan) -> None:
    """The follow loop's outcome, read as a soak reads it: a killed launch has none (the
    kill was the plan); a launch that ended ok short of the planned steps crashed."""
    if attempt.killed:
        attempt.outcome = None
        return
    if attempt.outcome is Outcome.OK and attempt.done < plan.steps:
        attempt.outcome = Outcome.CRASH
        attempt.detail = f"ended ok after {attempt.done} of {plan.steps} steps"


# -- the soak -------------------------------------------------------------------------------
class Progress:
    """A line about every 10 % of the steps: step, loss, throughput (in the workload's
    unit), RSS."""

    def __init__(self, say: Callable[[str], None], steps: int, unit: str | None = None) -> None:
        self.say, self.steps, self.unit = say, steps, rate(unit, short=True)
        self.every = max(1, steps // 10)
        self.shown = 0
        self.recent: list[float] = []

    def __call__(self, s: StepRecord) -> None:
        if s.step_s > 0 and s.phase.value != "compile":
            self.recent.append(s.tokens / s.step_s)
        done = s.step + 1
        if done <= self.shown or (done % self.every and done != self.steps):
            return
        self.shown = done
        speed = f"{np.median(self.recent):>9,.0f}" if self.recent else f"{'-':>9}"
        tps = f"{speed} {self.unit}"
        self.recent = []
        # Counted as steps done; the other lines name a step by its index (from 0).
        self.say(f"  {done:>{len(str(self.steps))}}/{self.steps} steps done "
                 f"{100 * done / self.steps:>3.0f} %  loss {s.loss:.4f}  {tps}  "
                 f"anon. memory {s.rss_gib:.2f} GiB")


def run_attempts(plan: SoakPlan, run_dir: TrialDir, runner: Runner, clocks: Clocks,
                 say: Callable[[str], None]) -> tuple[list[Attempt], str | None]:
    """Launch, kill, resume until the run ends; (attempts, why it failed or None).

    One unexpected failure (crash, divergence, hang) is resumed from the latest
    checkpoint like the kill; a second one ends the soak, as does a launch that made
    no step (a resume that cannot start)."""
    progress = Progress(say, plan.steps, plan.unit)

    def on_step(attempt: Attempt, s: StepRecord) -> None:
        if attempt.index and len(attempt.steps) == 1:
            say(f"  resumed at step {s.step} (first step {attempt.first_step_s:.1f} s after "
                "launch)")
        progress(s)

    attempts: list[Attempt] = []
    checkpoints: list[int] = []
    failures = 0
    while True:
        kill = plan.kill_from is not None and not any(a.killed for a in attempts)
        attempt = run_attempt(len(attempts), plan, run_dir, runner, clocks, kill=kill,
                              checkpoints=checkpoints, on_step=on_step)
        attempts.append(attempt)
        checkpoints.extend(attempt.checkpoints)
        resuming = attempt.index > 0
        if attempt.killed:
            say(f"  kill -9 after step {attempt.kill_done - 1} (latest checkpoint: after step "
                f"{attempt.kill_checkpoint - 1}, so {attempt.kill_done - attempt.kill_checkpoint}"
                f" step(s) to replay), {attempt.wall_s:.1f} s into the run; resuming from the "
                "latest checkpoint")
            continue
        if attempt.outcome is Outcome.OK:
            return attempts, None
        what = "resumed run" if resuming else "run"
        say(f"  {what} ended {attempt.outcome.value}: {attempt.detail}")
        if not attempt.steps:
            return attempts, (f"the {what} failed to start ({attempt.outcome.value}: "
                              f"{attempt.detail})")
        failures += 1
        if failures >= 2:
            return attempts, f"the run failed twice (last: {attempt.outcome.value})"
        say("  resuming from the latest checkpoint after the failure")


def stitch(attempts: list[Attempt]) -> tuple[list[StepRecord], list[int]]:
    """The run as it counts: each launch's steps up to where the next one resumed; and
    the steps at which a new process took over."""
    steps: list[StepRecord] = []
    restarts = []
    for i, a in enumerate(attempts):
        nxt = next((b for b in attempts[i + 1:] if b.steps), None)
        until = nxt.steps[0].step if nxt is not None else math.inf
        steps.extend(s for s in a.steps if s.step < until)
        if i and a.steps:
            restarts.append(a.steps[0].step)
    return steps, restarts


def kill_and_resume(attempts: list[Attempt], tolerance: float) -> ResumeCheck | None:
    """The resume check of the killed launch against the launch after it."""
    for i, a in enumerate(attempts):
        if a.killed:
            after = attempts[i + 1] if i + 1 < len(attempts) else None
            check = stability.resume_check(a.steps, after.steps if after else [], tolerance)
            return dataclasses.replace(check, kill_done=a.kill_done,
                                       kill_checkpoint=a.kill_checkpoint,
                                       killed_after_s=round(a.wall_s, 2))
    return None


