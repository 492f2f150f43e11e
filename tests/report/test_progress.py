"""The sweep's progress when nobody watches a terminal: a line per trial start and one a
minute while a long trial runs."""

from __future__ import annotations

import io

from rich.console import Console

from autotune.progress import RUNNING_LINE_EVERY_S, SweepProgress
from trials.contract.outcomes import Outcome


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def piped(enabled: bool = True) -> tuple[SweepProgress, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, force_terminal=False, width=200)
    return SweepProgress(4, 0, enabled=enabled, console=console, clock=clock), out, clock


def test_a_piped_sweep_says_when_a_trial_starts_and_each_minute_it_runs():
    progress, out, clock = piped()
    for second in range(0, 200, 2):  # an 80 s poll loop and more: ticks every 2 s
        clock.now = float(second)
        progress.trial_phase(3, "mb=2", "measure")
    progress.trial_done(3, "mb=2", Outcome.OK, 1000.0, True)
    lines = out.getvalue().splitlines()
    # Rule: one line at the start, one per RUNNING_LINE_EVERY_S of running (198 s: 3), one
    # at the end; not one per tick.
    assert lines[0].startswith("trial   3 started")
    running = [line for line in lines if "running for" in line]
    assert len(running) == int(198 // RUNNING_LINE_EVERY_S) == 3
    assert "running for 1 min [measure]" in running[0]
    assert lines[-1].startswith("trial   3 ok") and len(lines) == 5


def test_progress_off_prints_no_start_lines():
    progress, out, _ = piped(enabled=False)
    progress.trial_phase(1, "x", "compile")
    # Rule: sweep.progress=false keeps only the per-trial result lines.
    assert out.getvalue() == ""
