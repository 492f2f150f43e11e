"""Keep K trials in flight on a pool of devices (``sweep.parallel_trials=K``).

The sweep prepares proposals (ask, check, claim) one at a time in the main
thread; each ready proposal runs in a thread of its own once the pool has its
devices. Trials need different numbers of devices (a dp=8 trial, a dp=1 trial),
so a proposal that does not fit yet waits in a short line while smaller ones
fill the free devices (backfill). A proposal passed over ``MAX_PASSED`` times
reserves the pool: nothing behind it starts until it fits, so large trials are
not starved. A proposal that waits for the same configuration running elsewhere
holds no devices.

Stopping (SIGTERM, Ctrl-C) reaches the main thread; it raises the flag every
trial thread checks on its next tick, each kills and re-queues its trial, and
proposals that never started are re-queued too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from autotune.running.devices import UNPLACED, DevicePool, Placement
from autotune.settings import Launcher
from autotune.study.sweep_end import DONE, SweepEnd

#: How many times a waiting proposal may be passed over by smaller ones.
MAX_PASSED = 4
WAIT_S = 0.2


@dataclass
class Ready:
    """A proposal that passed every check, with its launch claim (or its twin to wait for)."""

    trial: Any  # optuna.Trial
    params: dict
    cfg: Any  # TrialConfig
    label: str
    devices: int  # devices it occupies; 0 while it only waits for a twin
    twin: int | None = None  # the same configuration, running elsewhere
    alone: bool = False  # the baseline of a new study: nothing runs beside it
    passed: int = field(default=0, compare=False)


@dataclass
class Settled:
    """What one proposal came to."""

    launched: bool
    stop: SweepEnd | None = None  # a reason to end the sweep now


class Dispatcher:
    """The sweep's loop with several trials in flight.

    ``prepare()`` returns a :class:`Ready` or a :class:`Settled` (decided without a
    launch); ``run(ready, placement)`` runs one in a thread and settles it; ``verdict(idle)``
    says why the sweep ends (budget spent, space exhausted, ...) or None; ``release(ready)``
    gives back a proposal that never started.
    """

    def __init__(self, pool: DevicePool | None, slots: int, *, prepare: Callable,
                 run: Callable, verdict: Callable[[int], SweepEnd | None],
                 release: Callable[[Ready], None], stopping: threading.Event,
                 on_stop: Callable[[BaseException], None] = lambda exc: None) -> None:
        self.pool = pool
        self.slots = slots
        self.prepare = prepare
        self.run_one = run
        self.verdict = verdict
        self.release = release
        self.stopping = stopping
        self.on_stop = on_stop
        self.waiting: list[Ready] = []
        self.running: dict[Future, tuple[Ready, Placement]] = {}

    def loop(self) -> SweepEnd:
        idle = 0
        halted: SweepEnd | None = None  # stop now: proposals in line are given back
        finished: SweepEnd | None = None  # nothing more to propose: the line still runs
        executor = ThreadPoolExecutor(max_workers=2 * self.slots, thread_name_prefix="trial")
        try:
            while True:
                stop = self._collect()  # always: finished trials give their devices back
                if stop and halted is None:
                    halted = stop
                    self._release_waiting()  # a twin-waiter may be waiting on one of them
                if halted is None:
                    self._start_what_fits(executor)
                    if finished is None and self._room_to_prepare():
                        end = self.verdict(idle)
                        if end is not None and end.kind.halts:
                            halted = end
                            self._release_waiting()
                        elif end is not None:
                            finished = end
                        else:
                            outcome = self.prepare()
                            if isinstance(outcome, Ready):
                                self.waiting.append(outcome)
                            elif outcome.stop:
                                halted = outcome.stop
                                self._release_waiting()
                            else:
                                idle = 0 if outcome.launched else idle + 1
                            continue
                if not self.running and (halted is not None or not self.waiting):
                    break
                wait(list(self.running), timeout=WAIT_S, return_when=FIRST_COMPLETED)
        except BaseException as exc:
            self.on_stop(exc)  # before the flag: trial threads read why they stop
            self.stopping.set()
            self._release_waiting()
            wait(list(self.running))
            raise
        finally:
            executor.shutdown(wait=True)
        if halted is not None:
            return halted
        # Re-read now that every trial in flight has finished (launch counts are final).
        return self.verdict(idle) or finished or DONE

    def _release_waiting(self) -> None:
        for ready in self.waiting:
            self.release(ready)
        self.waiting.clear()

    # -- steps ----------------------------------------------------------------------------
    def _collect(self) -> SweepEnd | None:
        """Settle finished trials, return their devices; the first reason to stop."""
        stop = None
        for future in [f for f in self.running if f.done()]:
            _, placement = self.running.pop(future)
            if self.pool is not None:
                self.pool.give(placement)
            settled: Settled = future.result()  # a trial thread's exception ends the sweep
            stop = stop or settled.stop
        return stop

    def _alone_in_flight(self) -> bool:
        return any(ready.alone for ready, _ in self.running.values())

    def _room_to_prepare(self) -> bool:
        """Prepare another proposal only when it could start now or soon: fewer than K
        in flight and the line short; never beside the new study's baseline."""
        if self._alone_in_flight() or any(r.alone for r in self.waiting):
            return False
        in_flight = sum(1 for r, _ in self.running.values() if r.devices)
        return (in_flight < self.slots and len(self.waiting) < self.slots
                and len(self.running) < 2 * self.slots)

    def _start_what_fits(self, executor: ThreadPoolExecutor) -> None:
        """Start waiting proposals in line order where their devices are free; a smaller one
        may overtake a larger one (backfill), but one overtaken MAX_PASSED times reserves the
        pool: nothing behind it starts until it fits."""
        blocked: list[Ready] = []  # earlier in line, did not fit on this pass
        for ready in list(self.waiting):
            if self._alone_in_flight():
                return
            if ready.alone and self.running:
                return  # the baseline waits for the pool to empty, and runs by itself
            if ready.devices and sum(1 for r, _ in self.running.values() if r.devices) \
                    >= self.slots:
                return
            if any(b.passed >= MAX_PASSED for b in blocked):
                return
            placement = self._take(ready)
            if placement is None:
                blocked.append(ready)
                continue
            for earlier in blocked:  # overtaken: counted only when it really happens
                earlier.passed += 1
            self.waiting.remove(ready)
            self.running[executor.submit(self.run_one, ready, placement)] = (ready, placement)

    def _take(self, ready: Ready) -> Placement | None:
        if not ready.devices or self.pool is None:
            return UNPLACED
        return self.pool.take(ready.devices)


def device_pool(settings, hardware, note: Callable[[str], None]) -> DevicePool | None:
    """The devices concurrent trials share on this machine (None: the runner's cluster
    places them). CPU trials side by side disturb each other: said once, here."""
    if settings.launcher is not Launcher.local:
        return None
    pool = DevicePool(hardware.backend, hardware.devices)
    if pool.backend == "CPU":
        # One line on the console (not a log warning as well: it would print twice).
        note(f"note: {settings.parallel_trials} CPU trials run side by side, each pinned to "
             "its own cores: they still share memory bandwidth and caches, so their tokens/s "
             "disturb each other; use sweep.parallel_trials=1 (or confirm) for the numbers "
             "you export")
    return pool
