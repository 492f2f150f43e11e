"""How busy the rest of this machine is: CPU cores used by *other* processes over an interval.

One measurement for everyone who must know whether a number was taken on a quiet host:
the CPU peak calibration (trials/calibrate.py) refuses a figure measured under load, and
the benchmarks (bench/_common.py) record the load of every run. Plain Python (Linux
``/proc/stat``; elsewhere it reads 0), so both sides of the contract may use it.

    meter = LoadMeter()
    ...                                  # the work being measured
    load = meter.stop()                  # {"foreign_cores": 0.03, "steal_cores": 0.0}
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_stat() -> tuple[float, float | None, float]:
    """(busy, steal, total) CPU seconds of the whole machine since boot, from /proc/stat;
    steal None where the kernel does not report it (before 2.6.11), all 0 off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return 0.0, None, 0.0
    v = [int(x) for x in fields[:8]]
    user, nice, system, idle, iowait, irq, softirq = (v + [0] * 7)[:7]
    steal = v[7] if len(v) > 7 else None
    busy = user + nice + system + irq + softirq
    total = busy + idle + iowait + (steal or 0)
    return busy / _TICK, None if steal is None else steal / _TICK, total / _TICK


def cpu_times() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot (:func:`proc_stat`)."""
    busy, steal, _ = proc_stat()
    return busy, steal or 0.0


def own_cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its finished, reaped children."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime + time.process_time()


class LoadMeter:
    """CPU cores used by *other* processes (and stolen by the hypervisor) over an interval.

    Busy CPU time of the machine minus what we and our finished children used, divided
    by the wall time: about 0 on a quiet machine, up to the core count when another job
    competes. ``/proc/stat`` counts in clock ticks (10 ms), so measure for at least about
    a second for a figure good to a few hundredths of a core.
    """

    def __init__(self) -> None:
        self.start()

    def start(self) -> None:
        self._busy, self._steal = cpu_times()
        self._own = own_cpu_s()
        self._t = time.perf_counter()

    def stop(self) -> dict[str, float]:
        busy, steal = cpu_times()
        own = own_cpu_s()
        wall = max(time.perf_counter() - self._t, 1e-9)
        return {"foreign_cores": max(0.0, (busy - self._busy - (own - self._own)) / wall),
                "steal_cores": max(0.0, (steal - self._steal) / wall)}
