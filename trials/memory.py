"""Memory on a backend that reports none: the trial's peak, an address-space cap, OOM detection.

MindSpore's CPU backend ignores ``max_size`` and its memory statistics read zero
(MindSpore 2.10 on CPU), so the budget is enforced here: ``RLIMIT_AS`` makes an
allocation fail fast, and a measured peak (:class:`PeakMemory`: the proportional set size
of the trial's processes) over budget also counts as OOM.
"""

from __future__ import annotations

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
    return _field_kib(f"/proc/{pid}/status", field)


def _field_kib(path: str, field: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int | str) -> list[int]:
    kids = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            kids.extend(int(k) for k in text)
    except OSError:
        pass
    return kids


def _rollup_kib(pid: int | str) -> tuple[int, int]:
    """(PSS, its anonymous and shared-memory part) of one process: each page it maps
    counted as 1/N, N the processes that map it. Its RSS for both where the kernel has no
    smaps_rollup (before 4.14), PSS for both where it has no Pss_Anon (before 5.10)."""
    pss = anon = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, value = line.partition(":")
            if key == "Pss":
                pss = int(value.split()[0])
            elif key in ("Pss_Anon", "Pss_Shmem"):
                anon += int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if not pss:
        pss = _status_kib(pid, "VmRSS")
    return pss, anon or pss


def trial_memory_kib(pid: int | str = "self") -> tuple[int, int]:
    """The memory the trial holds: the proportional set size (PSS) of the process and
    every process under it (dataset workers), summed; and the anonymous part of it.

    Not their RSS summed: dataset worker processes start as copies of the trial process
    and share most of its pages (copy-on-write), and RSS counts a shared page once in
    every process that maps it; PSS counts it once in all (measured with
    data.num_workers=2 data.multiprocessing=true on image_cnn: 7 processes, 1.45 GiB of
    RSS summed, 0.37 GiB of PSS). A page shared with a process outside the trial counts
    in part too: the MindSpore libraries' pages, while other MindSpore processes run on
    the host (a single-process gpt_tiny trial here: 0.43 GiB of PSS, 0.57 of RSS). The
    anonymous part (heap, shared memory) is free of that: where a leak grows, and what no
    other process's start or end moves."""
    total = anon = 0
    pending: list[int | str] = [pid]
    while pending:
        process = pending.pop()
        pss, process_anon = _rollup_kib(process)
        total, anon = total + pss, anon + process_anon
        pending.extend(_children(process))
    return total, anon


class PeakMemory:
    """The trial's memory (:func:`trial_memory_kib`, in GiB) at its peak: the one number
    the memory guard holds against the budget and the trial records as its peak.

    The kernel keeps a high-water mark of RSS per process (VmHWM) but none of PSS, and
    samples between steps miss what a step allocates and frees. So each sample adds what
    this process once held above what it holds now (VmHWM - VmRSS: private pages, which
    PSS counts in full) to the PSS of now; workers are sampled as they are.
    """

    def __init__(self) -> None:
        self.peak_gib = 0.0
        #: The anonymous part of the trial's memory at the last sample: the series whose
        #: slope a soak reads as a leak (no process outside the trial moves it).
        self.anon_gib = 0.0

    def sample(self) -> float:
        """Measure now; the peak so far."""
        unseen_kib = max(0, _status_kib("self", "VmHWM") - _status_kib("self", "VmRSS"))
        now_kib, anon_kib = trial_memory_kib()
        self.anon_gib = anon_kib / 1024**2
        self.peak_gib = max(self.peak_gib, (now_kib + unseen_kib) / 1024**2)
        return self.peak_gib


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
