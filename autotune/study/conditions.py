"""The host's state while a run was measured, and the flags a reader needs to see.

A run's tokens/s is only as good as the machine it ran on: on a shared host another job
can take a core for a minute and move a trial's figure by tens of per cent
(docs/benchmarks-history.md, "Seam refactor overhead": identical code differed by -25..+17 %
while other jobs used 0.6-1.6 of 2 cores). The follow loop measures :class:`Conditions`
for every run
(:mod:`autotune.running.conditions`); the study stores them with the trial and with each
repeat; a run measured under other processes' load above ``sweep.contention_cores`` is
*contended*, a baseline whose interval misses ``run.target_interval`` is *imprecise*.
Both are flags for the reader (the progress line, the leaderboard, the report); no
decision reads them yet.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from trials.contract.jsonsafe import float_of
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance

#: A window shorter than this is not judged for contention: /proc/stat counts CPU time in
#: ticks (10 ms per core), so a load figure over 0.1 s is off by up to ~0.2 cores per core
#: at each end, and a momentary spike is not contention.
MIN_WINDOW_S = 1.0
#: Seconds before the window's end over which :attr:`Conditions.recent_cores` is measured:
#: the last steps, which a slow rule judges a trial by (a run stopped early is mostly
#: warm-up, and a load that started late is diluted over its whole run).
RECENT_S = 3.0
#: The verdicts a loaded host can cause by itself: stopped as slow, or by a clock (no step
#: in time, past the wall cap). Reached under load, none says what the configuration is.
LOAD_CAN_CAUSE = (Outcome.SLOW, Outcome.HANG, Outcome.TIMEOUT)
#: A host whose load stays: this many of the study's last runs (the newest included)...
STAYS_LOADED_RUNS = 4
#: ...of which at least this many were measured under load. A load that passes (a compile
#: next door, a backup) loads one or two runs; waiting for quiet and re-running is right
#: for it. A host that stays loaded would make every slow trial wait and run twice.
STAYS_LOADED_MIN = 3
#: The window's kinds: the measured steps (the steps tokens/s is computed from), or the
#: whole run (it measured no step, or its measured steps were read in one go).
MEASURED_STEPS = "measured steps"
WHOLE_RUN = "whole run"


def stays_loaded(loads: list[bool]) -> bool:
    """Whether the host stays loaded: of the study's runs in time order (``loads``: each
    measured under load or not, the newest last), at least :data:`STAYS_LOADED_MIN` of the
    last :data:`STAYS_LOADED_RUNS`, the newest among them."""
    recent = loads[-STAYS_LOADED_RUNS:]
    return bool(recent) and recent[-1] and sum(recent) >= STAYS_LOADED_MIN


@dataclass(frozen=True)
class Conditions:
    """What the host did during one run's window. None: not known (not on this host: a
    SLURM job elsewhere, a replayed run; the kernel does not report it)."""

    #: CPU time of every process but this run's and the orchestrator's, over the window,
    #: in cores (0: quiet; up to the core count when other jobs compete).
    other_cores: float | None = None
    #: Share of the host's CPU time the hypervisor gave to other guests (steal).
    steal_share: float | None = None
    #: The run's cores' clock (``scaling_cur_freq``) over the window's samples, MHz.
    cpu_mhz_min: float | None = None
    cpu_mhz_mean: float | None = None
    #: The devices and cores the run was placed on ("" = the whole machine).
    placement: str = ""
    #: :data:`MEASURED_STEPS` or :data:`WHOLE_RUN`, and its length.
    window: str = WHOLE_RUN
    window_s: float = 0.0
    #: Other processes' cores over the window's last :data:`RECENT_S` (None: too short).
    recent_cores: float | None = None
    #: Judged against ``contention_cores`` (None: not judged yet).
    contended: bool | None = None
    contention_cores: float | None = None

    def judge(self, contention_cores: float) -> Conditions:
        """Flag the run when other processes used more than ``contention_cores`` over a
        window long enough to tell (:data:`MIN_WINDOW_S`)."""
        loaded = (self.other_cores is not None and self.window_s >= MIN_WINDOW_S
                  and self.other_cores > contention_cores)
        return dataclasses.replace(self, contended=loaded, contention_cores=contention_cores)

    def loaded_at_the_end(self, contention_cores: float) -> bool:
        """Other processes above ``contention_cores`` over the window or over its last
        seconds: what a trial stopped as slow is judged by (the load may have come late)."""
        judged = self.judge(contention_cores)
        return bool(judged.contended) or (self.recent_cores is not None
                                          and self.recent_cores > contention_cores)

    def may_explain(self, reason: Outcome, contention_cores: float) -> bool:
        """Whether this load may be what ended a run as ``reason``: a verdict of
        :data:`LOAD_CAN_CAUSE` reached while the host was loaded."""
        return reason in LOAD_CAN_CAUSE and self.loaded_at_the_end(contention_cores)

    def speed_left(self) -> float | None:
        """The least share of its quiet speed this load can have left the run: other
        processes' busy cores (``other_cores``, or its last seconds' if more) all on the
        core of the run's slowest thread, which a fair scheduler then gives 1 / (1 + load)
        of it; a step that waits for its slowest thread (a data-parallel all-reduce, a
        thread pool's join) is no faster. None when the load was not measured."""
        loads = [c for c in (self.other_cores, self.recent_cores) if c is not None]
        return 1.0 / (1.0 + max(loads)) if loads else None

    def text(self) -> str:
        """One line: 'other processes 1.30 cores over 4.2 s of measured steps, ...'."""
        if self.other_cores is None:
            parts = ["host load not measured (the run was not on this host)"]
        else:
            parts = [f"other processes {self.other_cores:.2f} cores over "
                     f"{self.window_s:.1f} s ({self.window})"]
        if self.steal_share is not None:
            parts.append(f"steal {100 * self.steal_share:.1f} %")
        if self.cpu_mhz_mean is not None:
            parts.append(f"CPU {self.cpu_mhz_min:,.0f}-{self.cpu_mhz_mean:,.0f} MHz (min-mean)")
        if self.placement:
            parts.append(self.placement)
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> Conditions | None:
        if not data:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        for key in ("other_cores", "steal_share", "cpu_mhz_min", "cpu_mhz_mean",
                    "contention_cores", "recent_cores"):
            if known.get(key) is not None:
                known[key] = float_of(known[key])
        return cls(**known)


def load_flag(conditions: Conditions | None) -> str | None:
    """'load 1.3' for a contended run, else None."""
    if conditions is None or not conditions.contended:
        return None
    return f"load {conditions.other_cores:.1f}"


def missed_precision(perf: Performance, target_interval: float) -> str | None:
    """'interval +-17.1 % > target +-2 %' when a run's interval is wider than its target
    (``run.target_interval``); None when it met it or measured nothing."""
    width = perf.interval_half_width
    if width is None or perf.tokens_per_s is None:
        return None
    if math.isfinite(width) and width <= target_interval:
        return None
    shown = f"+-{100 * width:.1f} %" if math.isfinite(width) else "unknown"
    return f"interval {shown} > target +-{100 * target_interval:g} %"
