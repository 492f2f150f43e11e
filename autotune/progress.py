"""The sweep's progress bar: launches done/total, best throughput (tokens/s, or the
workload's unit), current trial and phase, ETA."""

from __future__ import annotations

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


class SweepProgress:
    """A rich progress bar on a terminal; one plain line per finished trial otherwise."""

    def __init__(self, total: int, done: int, *, enabled: bool, console: Console) -> None:
        self.console = console
        self.live = enabled and console.is_terminal
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
        if self._progress is not None:
            self._progress.update(self._task, current=self.current, best=self._best_text())

    def trial_done(self, number: int, label: str, reason: Outcome | None, tps: float | None,
                   launched: bool, note: str = "", flags: list[str] | tuple[str, ...] = (),
                   unit: str | None = None) -> None:
        """One line per finished trial; ``flags`` ('load 1.3': measured under other
        processes' load; 'imprecise': the baseline missed its precision target) are shown
        after its throughput with a '!'; ``unit``: what that counts (tokens, samples)."""
        self.unit = unit or self.unit
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
