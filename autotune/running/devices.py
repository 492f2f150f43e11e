"""Disjoint device sets for trials that run side by side on one machine.

With ``sweep.parallel_trials=K`` several trials share the machine. Each takes
its own devices of the hardware profile, handed over the way each backend's
runtime reads them (``ASCEND_RT_VISIBLE_DEVICES``, ``CUDA_VISIBLE_DEVICES``),
so ranks inside the trial number their devices from 0 as usual. On the CPU a
"device" is a share of the cores: the trial is pinned to its cores with
``taskset``, inherited by every rank msrun starts. Pinning keeps trials off each
other's cores, but not off the shared memory bandwidth and caches, so concurrent
CPU trials still disturb each other's numbers (the sweep says so).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

#: The variable each backend's runtime reads to restrict a process to some devices.
VISIBLE_DEVICES = {"Ascend": "ASCEND_RT_VISIBLE_DEVICES", "GPU": "CUDA_VISIBLE_DEVICES"}


@dataclass(frozen=True)
class Placement:
    """Where one trial runs: its device ids, the CPU cores it is pinned to (empty: not
    pinned) and the environment that restricts it to them."""

    devices: tuple[int, ...] = ()
    cores: tuple[int, ...] = ()
    env: dict = field(default_factory=dict)

    def argv_prefix(self) -> list[str]:
        """``taskset`` pinning the trial (and its children) to its cores, or nothing."""
        return ["taskset", "-c", ",".join(map(str, self.cores))] if self.cores else []

    def text(self) -> str:
        parts = [f"devices {','.join(map(str, self.devices))}"] if self.devices else []
        if self.cores:
            parts.append(f"cores {','.join(map(str, self.cores))}")
        return " ".join(parts)


#: Nothing restricted: the single-trial sweep, as before.
UNPLACED = Placement()


def available_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


class DevicePool:
    """The profile's devices; ``take`` hands out free ones, ``give`` returns them.

    Thread-safe: the sweep's dispatcher takes, the trial threads give back.
    """

    def __init__(self, backend: str, n_devices: int, cores: list[int] | None = None) -> None:
        self.backend = backend
        self.n_devices = n_devices
        self.free = set(range(n_devices))
        self.cores = available_cores() if cores is None else list(cores)
        self._lock = threading.Lock()

    @property
    def cores_shared(self) -> bool:
        """More CPU devices than cores: pinned trials still share cores."""
        return self.backend == "CPU" and self.n_devices > len(self.cores)

    def n_free(self) -> int:
        with self._lock:
            return len(self.free)

    def take(self, n: int) -> Placement | None:
        """``n`` free devices (the lowest ids, contiguous where possible), or None."""
        with self._lock:
            if n > len(self.free):
                return None
            ids = self._choose(n)
            self.free -= set(ids)
        return self.placement(ids)

    def give(self, placement: Placement) -> None:
        with self._lock:
            self.free |= set(placement.devices)

    def _choose(self, n: int) -> tuple[int, ...]:
        free = sorted(self.free)
        for start in range(len(free) - n + 1):  # a contiguous run keeps larger runs whole
            run = free[start:start + n]
            if run[-1] - run[0] == n - 1:
                return tuple(run)
        return tuple(free[:n])

    def placement(self, ids: tuple[int, ...]) -> Placement:
        if self.backend in VISIBLE_DEVICES:
            return Placement(devices=ids, env={VISIBLE_DEVICES[self.backend]:
                                               ",".join(map(str, ids))})
        return Placement(devices=ids, cores=self.cores_of(ids))

    def cores_of(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        """CPU device i owns an equal share of the cores (round-robin when fewer cores)."""
        per = max(1, len(self.cores) // max(1, self.n_devices))
        if len(self.cores) >= self.n_devices:
            chosen = [c for i in ids for c in self.cores[i * per:(i + 1) * per]]
        else:
            chosen = [self.cores[i % len(self.cores)] for i in ids]
        return tuple(sorted(set(chosen)))
