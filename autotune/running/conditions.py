"""Measure the host's state while a run is measured: other processes' load, steal time,
the CPU clock, the placement (the record: :class:`autotune.study.conditions.Conditions`).

Other processes' load is the host's busy CPU time (``/proc/stat``) minus what this run's
processes used (``/proc/<pid>/stat`` of every process carrying its marker, msrun ranks
and data workers included) and what the orchestrator used, over the window's wall time.
Concurrent trials of the same sweep count as other load: they compete for the same
memory bandwidth and caches even on cores of their own.

The follow loop (:func:`autotune.running.monitor.run`) drives one meter per run:

    meter = ConditionsMeter(trial.marker, placement)   # the window opens at the start
    meter.record(record)    # every record: a warm-up step re-opens it, the summary closes it
    meter.sample()          # every poll (throttled): the run's processes' CPU so far
    conditions = meter.finish()

The window is the measured steps where there are any: it opens when the last warm-up
(or compile) step is read and closes when the summary is read. A run that measured no
step, or whose measured steps were read within less than ``MIN_WINDOW_S`` (a scripted
trial's, a few short steps read at once), is measured over the whole run.
The host's counters come from the contract's one reader of ``/proc/stat``
(:mod:`trials.contract.hostload`, which the CPU peak's calibration and the benchmarks
use too); this module adds what only a run has: its processes, its window.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from autotune.running.devices import UNPLACED, Placement, available_cores
from autotune.running.launcher import processes_with_marker
from autotune.study.conditions import (
    MEASURED_STEPS,
    MIN_WINDOW_S,
    RECENT_S,
    WHOLE_RUN,
    Conditions,
)
from trials.contract.events import EndRecord, Phase, Record, StepRecord, SummaryRecord
from trials.contract.hostload import LoadMeter, proc_stat

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
#: Seconds between looks for the run's processes (a look reads every /proc/<pid>/environ:
#: ~1 ms on a host with ~100 processes).
SAMPLE_S = 0.5
PROC = Path("/proc")
CPUFREQ = Path("/sys/devices/system/cpu")


def host_cpu_s() -> tuple[float, float | None, float]:
    """(busy, steal, total) CPU seconds of the whole host since boot (the contract's one
    reader of /proc/stat, :func:`trials.contract.hostload.proc_stat`)."""
    return proc_stat()


def process_cpu_s(pid: int) -> tuple[float, float] | None:
    """(user + system CPU seconds, start time in seconds since boot) of a process, or None
    once it is gone. Its reaped children's time is left out: they are followed themselves."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
        rest = text[text.rfind(")") + 2:].split()  # the name may hold spaces, parentheses
        utime, stime, start = int(rest[11]), int(rest[12]), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None
    return (utime + stime) * _TICK_S, start * _TICK_S


def cpu_mhz(cores: tuple[int, ...] | list[int]) -> list[float]:
    """The current clock of each core that reports one (none in most VMs), in MHz."""
    out = []
    for core in cores:
        try:
            khz = (CPUFREQ / f"cpu{core}" / "cpufreq" / "scaling_cur_freq").read_text()
            out.append(int(khz) / 1000)
        except (OSError, ValueError):
            continue
    return out


def _since_boot() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class _Zero:
    """Where a window starts: the clocks, the host's and the orchestrator's CPU, and each
    of the run's processes' CPU, at its opening."""

    def __init__(self, known: dict[int, float]) -> None:
        self.t = time.monotonic()
        self.boot_s = _since_boot()
        self.busy_s, self.steal_s, self.total_s = host_cpu_s()
        self.own_s = time.process_time()  # the orchestrator, every thread of it
        self.first = dict(known)  # pid -> its CPU seconds at the opening

    def see(self, pid: int, cpu_s: float, started_s: float) -> None:
        if pid not in self.first:
            # Started inside the window: all its CPU time is the run's; else only what it
            # used from the opening on is (its CPU then is unknown: take it as of now).
            self.first[pid] = 0.0 if started_s >= self.boot_s - _TICK_S else cpu_s


class ConditionsMeter:
    """One run's :class:`Conditions`, measured over its window (see the module)."""

    def __init__(self, marker: str, placement: Placement = UNPLACED, *,
                 sample_s: float = SAMPLE_S,
                 find: Callable[[str], list[int]] = processes_with_marker) -> None:
        self.marker = marker
        self.placement = placement
        self.sample_s = sample_s
        self.find = find
        self.cores = placement.cores or tuple(available_cores())
        self.last: dict[int, float] = {}  # pid -> its CPU seconds when last seen
        self.mhz: list[tuple[float, float]] = []  # (when, MHz) of each core read
        self.looked = -float("inf")
        #: (when, host busy s, the run's CPU s, the orchestrator's CPU s) at each sample.
        self.snapshots: deque[tuple[float, float, float, float]] = deque(maxlen=256)
        self.run = _Zero({})
        self.window = self.run
        self.measuring = False  # a measured step was read in the open window
        self.closed: Conditions | None = None
        self.sample(force=True)

    def open(self) -> None:
        """(Re)open the window now: the host's and the run's CPU so far are its zero."""
        self.sample(force=True)
        self.window = _Zero(self.last)

    def record(self, record: Record) -> None:
        """Follow the run's records: warm-up re-opens the window, the summary closes it."""
        if self.closed is not None:
            return
        if isinstance(record, StepRecord):
            if record.phase in (Phase.COMPILE, Phase.WARMUP) and not self.measuring:
                self.open()
            elif record.phase is Phase.MEASURE:
                self.measuring = True
            elif record.phase is Phase.PROFILE and self.measuring:
                self.close()  # profiled steps are in no measured number
        elif isinstance(record, (SummaryRecord, EndRecord)):
            self.close()

    def sample(self, *, force: bool = False) -> None:
        """Take in the run's processes' CPU so far (at most every ``sample_s``)."""
        now = time.monotonic()
        if self.closed is not None or (not force and now - self.looked < self.sample_s):
            return
        self.looked = now
        for pid in self.find(self.marker):
            seen = process_cpu_s(pid)
            if seen is None:
                continue
            for zero in {id(self.run): self.run, id(self.window): self.window}.values():
                zero.see(pid, *seen)
            self.last[pid] = seen[0]
        self.mhz += [(now, mhz) for mhz in cpu_mhz(self.cores)]
        run_s = sum(self.last[pid] - first for pid, first in self.run.first.items()
                    if pid in self.last)
        self.snapshots.append((now, host_cpu_s()[0], run_s, time.process_time()))

    def close(self) -> Conditions:
        """Close the window now (later records change nothing); the run's conditions."""
        if self.closed is None:
            self.sample(force=True)
            measured = self.measuring and time.monotonic() - self.window.t >= MIN_WINDOW_S
            over = self._over(self.window if measured else self.run,
                              MEASURED_STEPS if measured else WHOLE_RUN)
            self.closed = dataclasses.replace(over, recent_cores=self.recent_cores())
        return self.closed

    def recent_cores(self, seconds: float = RECENT_S) -> float | None:
        """Other processes' cores over about the last ``seconds`` of samples; None when
        the samples span less than :data:`MIN_WINDOW_S` (too short to tell)."""
        if not self.snapshots:
            return None
        end = self.snapshots[-1]
        start = next((s for s in self.snapshots if s[0] >= end[0] - seconds), end)
        wall = end[0] - start[0]
        if wall < MIN_WINDOW_S:
            return None
        return max(0.0, ((end[1] - start[1]) - (end[2] - start[2]) - (end[3] - start[3]))
                   / wall)

    def finish(self) -> Conditions:
        """The run's conditions (closing the window now if its summary never came)."""
        return self.close()

    def _over(self, zero: _Zero, window: str) -> Conditions:
        wall_s = time.monotonic() - zero.t
        busy_s, steal_s, total_s = host_cpu_s()
        run_s = sum(self.last[pid] - first for pid, first in zero.first.items()
                    if pid in self.last)
        own_s = time.process_time() - zero.own_s
        other = None
        if self.last and wall_s > 0:  # none of its processes here: not this host's run
            other = max(0.0, (busy_s - zero.busy_s - run_s - own_s) / wall_s)
        steal = None
        if steal_s is not None and zero.steal_s is not None and total_s > zero.total_s:
            steal = max(0.0, (steal_s - zero.steal_s) / (total_s - zero.total_s))
        mhz = [m for t, m in self.mhz if t >= zero.t]
        return Conditions(
            other_cores=other, steal_share=steal,
            cpu_mhz_min=min(mhz) if mhz else None,
            cpu_mhz_mean=sum(mhz) / len(mhz) if mhz else None,
            placement=self.placement.text(), window=window, window_s=wall_s)


def other_load_now(sample_s: float = 1.0) -> float:
    """Cores other processes use now, over ``sample_s`` (the orchestrator only waits)."""
    meter = LoadMeter()
    time.sleep(sample_s)
    return meter.stop()["foreign_cores"]


def wait_for_quiet(threshold_cores: float, *, max_wait_s: float,
                   tick: Callable[[], None] = lambda: None) -> float:
    """Wait until other processes use at most ``threshold_cores`` over one second, or
    ``max_wait_s`` passed; the load last measured. ``tick`` each second (it may raise: the
    orchestrator was told to stop)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        load = other_load_now()
        if load <= threshold_cores or time.monotonic() >= deadline:
            return load
        tick()
