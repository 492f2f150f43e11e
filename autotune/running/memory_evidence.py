"""Whether a trial that ended without an outcome of its own ran out of memory.

A trial that wrote no end record was killed (it, or its launcher: msrun), or died in
native code. It is ``oom`` only with evidence that memory ran out:

- the kernel's OOM killer fired while it ran (``oom_kill`` in ``/proc/vmstat``, the
  kernel's own count of OOM kills, rose);
- its last measured peak RSS was at least :data:`NEAR_BUDGET` of its memory budget (the
  trial's guard stops it at the budget; a kill between two of its measurements is here);
- its output says an allocation failed (an uncaught ``std::bad_alloc`` aborts in native
  code before Python sees it: for that no structured signal can exist).

Anything else is a ``crash`` named in words ("msrun killed by signal 9 (SIGKILL)"): a
process killed from outside says nothing about its configuration's memory, and an
``oom`` would feed the memory constraint and the micro-batch dominance rule.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from trials.contract.events import StartRecord, StepRecord
from trials.contract.outcomes import OOM_MESSAGES, Outcome

VMSTAT = Path("/proc/vmstat")
#: A peak RSS at this share of the budget or above counts as running out of memory: the
#: trial samples its peak once a step, so memory may grow past it before the next sample.
NEAR_BUDGET = 0.9


def kernel_oom_kills(path: Path = VMSTAT) -> int | None:
    """The kernel's count of OOM kills since boot (None where it cannot be read)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


@dataclass(frozen=True)
class KernelOOMKills:
    """The kernel's OOM-kill count when a trial started, to compare when it ended."""

    at_start: int | None
    path: Path = VMSTAT

    @classmethod
    def now(cls, path: Path = VMSTAT) -> KernelOOMKills:
        return cls(kernel_oom_kills(path), path)

    def since(self) -> int:
        """OOM kills since the start (0 where the count cannot be read)."""
        now = kernel_oom_kills(self.path)
        if self.at_start is None or now is None:
            return 0
        return now - self.at_start


def how_it_died(who: str, exit_code: int | None) -> str:
    """The end in words: "msrun killed by signal 9 (SIGKILL)"."""
    if exit_code is not None and exit_code < 0:
        try:
            name = f" ({signal.Signals(-exit_code).name})"
        except ValueError:
            name = ""
        return f"{who} killed by signal {-exit_code}{name}"
    return f"{who} exited with code {exit_code} without an end record"


def _last_peak_gib(steps: list[StepRecord]) -> float | None:
    peaks = [s.peak_rss_gib for s in steps if s.peak_rss_gib]
    return peaks[-1] if peaks else None


def unexplained_end(exit_code: int | None, *, who: str, start: StartRecord | None,
                    steps: list[StepRecord], kernel_kills: int, log_tail: str
                    ) -> tuple[Outcome, str]:
    """``oom`` with its evidence, or ``crash`` with how it died and why it is not ``oom``."""
    died = how_it_died(who, exit_code)
    peak = _last_peak_gib(steps)
    budget = start.budget_gib if start is not None else None
    if kernel_kills > 0:
        return Outcome.OOM, (f"{died}; the kernel's OOM killer fired {kernel_kills} time(s) "
                             "while it ran")
    if peak is not None and budget and peak >= NEAR_BUDGET * budget:
        return Outcome.OOM, f"{died} at peak RSS {peak:.2f} GiB of its {budget:g} GiB budget"
    said = next((m for m in OOM_MESSAGES if m in log_tail), None)
    if said is not None:
        return Outcome.OOM, f"{died}; its output says {said!r}"
    measured = (f"peak RSS {peak:.2f} of {budget:g} GiB" if peak is not None and budget
                else "no peak measured")
    return Outcome.CRASH, (f"{died}; no sign of running out of memory ({measured}, no "
                           "kernel OOM kill while it ran)")
