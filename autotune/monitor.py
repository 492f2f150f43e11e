"""Watch one running trial: read its metrics live, enforce the stop rules, classify the end.

The monitor decides from structured signals only: events in the metrics file,
the exit code, and its own clocks. Free text (stderr) is kept for the human,
never parsed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autotune import launcher
from autotune.metrics_reader import MetricsReader
from autotune.settings import StopRules
from trials.protocol import Event, Outcome, Phase

POLL_S = 0.2


@dataclass
class TrialResult:
    """How a launched trial ended. ``reason`` is the taxonomy key (see records.REASON)."""

    reason: str
    detail: str = ""
    summary: dict | None = None
    steps: list[dict] = field(default_factory=list)
    start: dict | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    log_tail: str = ""


#: Called after each new step with (steps so far, phase); returns a reason to stop or None.
StepHook = Callable[[list[dict]], str | None]


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


def current_phase(steps: list[dict], started: bool) -> str:
    if not started:
        return "starting"
    if not steps:
        return Phase.COMPILE.value
    return steps[-1].get("phase", "?")


def watch(proc: launcher.TrialProcess, metrics_path: Path, trial_dir: Path, rules: StopRules,
          *, on_step: StepHook | None = None, on_tick: Callable[[str], None] | None = None,
          ) -> TrialResult:
    """Follow the trial until it exits or a stop rule kills it.

    If the orchestrator itself is interrupted, the trial's process group goes too.
    """
    try:
        return _watch(proc, metrics_path, trial_dir, rules, on_step, on_tick)
    except BaseException:
        launcher.stop(proc)
        raise


class _Follower:
    """What the metrics file has said so far."""

    def __init__(self, metrics_path: Path, on_step: StepHook | None) -> None:
        self.reader = MetricsReader(metrics_path)
        self.on_step = on_step
        self.start: dict | None = None
        self.steps: list[dict] = []
        self.summary: dict | None = None
        self.end: dict | None = None
        self.slow: str | None = None

    def read(self) -> bool:
        """Take in new events; True when a step arrived."""
        progressed = False
        for event in self.reader.read_new():
            kind = event.get("event")
            if kind == Event.START.value:
                self.start = event
            elif kind == Event.STEP.value:
                self.steps.append(event)
                progressed = True
                if self.on_step is not None and self.slow is None:
                    self.slow = self.on_step(self.steps)
            elif kind == Event.SUMMARY.value:
                self.summary = event
            elif kind == Event.END.value:
                self.end = event
        return progressed


def _watch(proc: launcher.TrialProcess, metrics_path: Path, trial_dir: Path, rules: StopRules,
           on_step: StepHook | None, on_tick: Callable[[str], None] | None) -> TrialResult:
    follow = _Follower(metrics_path, on_step)
    last_progress = proc.started
    stop: tuple[str, str] | None = None
    while proc.poll() is None:
        now = time.time()
        if follow.read():
            last_progress = now
        stop = (("slow", follow.slow) if follow.slow else
                _clock_verdict(now, proc.started, last_progress, bool(follow.steps), rules))
        if stop is not None:
            launcher.stop(proc)
            break
        if on_tick is not None:
            on_tick(current_phase(follow.steps, follow.start is not None))
        time.sleep(POLL_S)
    follow.read()  # what was flushed just before the exit
    # A trial that exited by itself may have left children (dataset workers, msrun ranks).
    launcher.kill_marked(proc.marker)
    result = TrialResult(reason="crash", summary=follow.summary, steps=follow.steps,
                         start=follow.start, exit_code=proc.poll(),
                         wall_s=time.time() - proc.started)
    result.reason, result.detail = _classify(stop, follow, result.exit_code)
    if result.reason not in (Outcome.OK.value, "slow"):
        result.log_tail = log_tail(trial_dir)
    return result


def _classify(stop: tuple[str, str] | None, follow: _Follower,
              exit_code: int | None) -> tuple[str, str]:
    """Our own stop first, then the trial's end event, then its exit code."""
    if stop is not None:
        return stop
    if follow.end is not None:
        reason, detail = follow.end.get("outcome", "crash"), follow.end.get("reason", "")
    else:
        reason = Outcome.from_exit_code(exit_code).value
        detail = f"exited with code {exit_code} without an end event"
    if reason == Outcome.OK.value and follow.summary is None:
        return "crash", "ended ok without a summary"
    return reason, detail


def _clock_verdict(now: float, started: float, last_progress: float, any_step: bool,
                   rules: StopRules) -> tuple[str, str] | None:
    if now - started > rules.wall_timeout_s:
        return "timeout", f"ran past the wall-clock cap of {rules.wall_timeout_s:g} s"
    if not any_step and now - started > rules.compile_timeout_s:
        return "hang", (f"no step finished within the compile budget of "
                        f"{rules.compile_timeout_s:g} s")
    if any_step and now - last_progress > rules.step_timeout_s:
        return "hang", f"no step progress for {rules.step_timeout_s:g} s"
    return None
