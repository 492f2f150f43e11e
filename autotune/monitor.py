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
from trials.scorecard import throughput

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


def _watch(proc: launcher.TrialProcess, metrics_path: Path, trial_dir: Path, rules: StopRules,
           on_step: StepHook | None, on_tick: Callable[[str], None] | None) -> TrialResult:
    reader = MetricsReader(metrics_path)
    result = TrialResult(reason="crash")
    steps: list[dict] = []
    end: dict | None = None
    last_progress = proc.started
    stop: tuple[str, str] | None = None
    while True:
        now = time.time()
        for event in reader.read_new():
            kind = event.get("event")
            if kind == Event.START.value:
                result.start = event
            elif kind == Event.STEP.value:
                steps.append(event)
                last_progress = now
                if on_step is not None and stop is None:
                    verdict = on_step(steps)
                    if verdict:
                        stop = ("slow", verdict)
            elif kind == Event.SUMMARY.value:
                result.summary = event
            elif kind == Event.END.value:
                end = event
        code = proc.poll()
        if code is not None:
            result.exit_code = code
            break
        if stop is None:
            stop = _clock_verdict(now, proc.started, last_progress, bool(steps), rules)
        if stop is not None:
            launcher.stop(proc)
            result.exit_code = proc.poll()
            break
        if on_tick is not None:
            on_tick(current_phase(steps, result.start is not None))
        time.sleep(POLL_S)
    for event in reader.read_new():  # what was flushed just before the exit
        kind = event.get("event")
        if kind == Event.STEP.value:
            steps.append(event)
        elif kind == Event.SUMMARY.value:
            result.summary = event
        elif kind == Event.END.value:
            end = event
    # A trial that exited by itself may have left children (dataset workers, msrun ranks).
    launcher.kill_marked(proc.marker)
    result.steps = steps
    result.wall_s = time.time() - proc.started
    if stop is not None:
        result.reason, result.detail = stop
    elif end is not None:
        result.reason, result.detail = end.get("outcome", "crash"), end.get("reason", "")
    else:
        outcome = Outcome.from_exit_code(result.exit_code)
        result.reason = outcome.value
        result.detail = f"exited with code {result.exit_code} without an end event"
    if result.reason == Outcome.OK.value and result.summary is None:
        result.reason, result.detail = "crash", "ended ok without a summary"
    if result.reason not in (Outcome.OK.value, "slow"):
        result.log_tail = log_tail(trial_dir)
    return result


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


def tokens_per_s_so_far(steps: list[dict]) -> tuple[float | None, int]:
    """(tokens/s estimate, steps it rests on) from every step after the compile step.

    Warm-up steps count too: a trial that is already far behind in warm-up is
    stopped without waiting for its measured steps (warm-up is rarely faster).
    """
    settled = [s for s in steps if s.get("phase") != Phase.COMPILE.value]
    if not settled:
        return None, 0
    as_measured = [{**s, "phase": Phase.MEASURE.value} for s in settled]
    return throughput(as_measured).get("tokens_per_s"), len(settled)
