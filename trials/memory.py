"""Memory on a backend that reports none: peak RSS, an address-space cap, OOM detection.

MindSpore's CPU backend ignores ``max_size`` and its memory statistics read zero
(MindSpore 2.10 on CPU), so the budget is enforced here: ``RLIMIT_AS`` makes an
allocation fail fast, and a measured peak over budget also counts as OOM.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from trials.contract.outcomes import OOM_MESSAGES

GIB = 1024**3


def limit_address_space(gib: float) -> None:
    """Cap this process's (and its future children's) virtual memory."""
    limit = int(gib * GIB)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _status_kib(pid: int | str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    kids = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            kids.extend(int(k) for k in text)
    except OSError:
        pass
    return kids


class PeakMemory:
    """Tracks peak RSS of this process plus its dataset worker processes (GiB)."""

    def __init__(self) -> None:
        self.peak_gib = 0.0

    def sample(self) -> float:
        own = _status_kib("self", "VmHWM")
        self.peak_gib = max(self.peak_gib, (own + _workers_kib()) / (1024**2))
        return self.peak_gib

    @staticmethod
    def current_gib() -> float:
        """RSS now (this process and its dataset workers): a leak shows as a slope of it."""
        return (_status_kib("self", "VmRSS") + _workers_kib()) / (1024**2)


def _workers_kib() -> int:
    workers = 0
    pending = _children(os.getpid())
    while pending:
        child = pending.pop()
        workers += _status_kib(child, "VmRSS")
        pending.extend(_children(child))
    return workers


def near_address_limit(margin_gib: float = 0.25) -> bool:
    """True when this process's peak virtual size reached its RLIMIT_AS (minus a margin).

    A structured signal for failures the limit caused but MindSpore reports in other
    words (e.g. a dataset thread that could not get its stack: "Resource temporarily
    unavailable").
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return False
    return _status_kib("self", "VmPeak") * 1024 >= soft - margin_gib * GIB


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError) or near_address_limit():
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in OOM_MESSAGES)
