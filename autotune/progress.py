"""The sweep's progress: on a terminal a bar (launches done/total, best throughput in
the workload's unit, current trial and phase, ETA); piped or redirected, plain lines:
one when a trial starts, one a minute while it runs, one when it ends."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from trials.contract.outcomes import Outcome
from trials.contract.units import rate

#: Seconds between the plain "still running" lines of a long trial (no terminal).
RUNNING_LINE_EVERY_S = 60.0


class SweepProgress:
    """A rich progress bar on a terminal; plain lines otherwise (a log file, a pipe, CI)."""

    def __init__(self, total: int, done: int, *, enabled: bool, console: Console,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.live = enabled and console.is_terminal
        self.plain = enabled and not console.is_terminal
        self._clock = clock
        self._running: dict[int, list[float]] = {}  # trial -> [started, last line]
        self.best: float | None = None
        #: What the throughput counts (the workload's unit, from its first trial's record).
        self.unit: str | None = None
        self.current = ""
        self._progress = None
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                TextColumn("best {task.fields[best]}"), TextColumn("{task.fields[current]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=console, transient=False)
            self._task = self._progress.add_task("sweep", total=total, completed=done,
                                                 best="-", current="")
            self._progress.start()

    def _best_text(self) -> str:
        return f"{self.best:,.0f} {rate(self.unit, short=True)}" if self.best else "-"

    def trial_phase(self, number: int, label: str, phase: str) -> None:
        self.current = escape(f"trial {number} {label} [{phase}]")  # [..] is rich markup
        if self.plain:
            self._plain_line(number, label, phase)
        if self._progress is not None:
            self._progress.update(self._task, current=self.current, best=self._best_text())

    def _plain_line(self, number: int, label: str, phase: str) -> None:
        """Without a bar, a long trial would be silent until it ends: say when it starts,
        then once every RUNNING_LINE_EVERY_S."""
        now = self._clock()
        if number not in self._running:
            self._running[number] = [now, now]
            self.note(f"trial {number:>3} started  {label}")
            return
        started, last = self._running[number]
        if now - last >= RUNNING_LINE_EVERY_S:
            self._running[number][1] = now
            self.note(f"trial {number:>3} running for {(now - started) / 60:.0f} min "
                      f"[{phase}]  {label}")

    def trial_done(self, number: int, label: str, reason: Outcome | None, tps: float | None,
                   launched: bool, note: str = "", flags: list[str] | tuple[str, ...] = (),
                   unit: str | None = None) -> None:
        """One line per finished trial; ``flags`` ('load 1.3': measured under other
        processes' load; 'imprecise': the baseline missed its precision target) are shown
        after its throughput with a '!'; ``unit``: what that counts (tokens, samples)."""
        self.unit = unit or self.unit
        self._running.pop(number, None)
        if tps is not None and reason is Outcome.OK and (self.best is None or tps > self.best):
            self.best = tps
        if self._progress is not None:
            self._progress.update(self._task, advance=1 if launched else 0,
                                  best=self._best_text(), current="")
        speed = f"{tps:,.0f} {rate(self.unit, short=True)}" if tps is not None else "-"
        if flags:
            speed += f" !{','.join(flags)}"
        cost = "" if launched else " (not launched)"
        text = reason.value if reason is not None else "?"
        note = f"\n          {note}" if note else ""
        self.console.print(f"trial {number:>3} {text:<11} {speed:>13}  {label}{cost}{note}",
                           highlight=False, soft_wrap=True, markup=False)

    def note(self, text: str) -> None:
        """One plain line about the sweep (racing, re-measuring)."""
        self.console.print(text, highlight=False, soft_wrap=True, markup=False)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
