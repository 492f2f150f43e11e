"""A full disk stops the sweep cleanly: one line naming the directory and its free space.

A full disk is not the trial's fault and not bad input: the running trial is
stopped, marked ``interrupted`` and re-queued like one stopped by SIGTERM, and the
command exits 1. SQLite cannot record anything on a full disk (its journal needs
room too), so a sweep holds a small :class:`Reserve` file in the study directory and
gives it up first: the room it leaves is what the interrupted trial's record is
written into.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

#: Below this much free space a metrics line or one SQLite page may not fit: the disk is
#: full for the sweep's purposes (a trial that ended then may have lost its last records).
MIN_FREE_BYTES = 1 << 20
#: Room the sweep keeps for itself: a few SQLite pages and their journal.
RESERVE_BYTES = 1 << 20
_FULL = (errno.ENOSPC, errno.EDQUOT)


def free_bytes(path: Path) -> int | None:
    """Free space (for this user) on the filesystem of ``path`` or its nearest ancestor."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class DiskFull(Exception):
    """The disk under ``where`` is full; ``consequences`` says what the sweep did about it."""

    def __init__(self, where: Path | str, *, free: int | None = None) -> None:
        self.where = Path(where)
        self.free = free_bytes(self.where) if free is None else free
        self.consequences: list[str] = []
        super().__init__(str(self.where))

    def __str__(self) -> str:
        done = "".join(f"; {c}" for c in self.consequences)
        return (f"the disk under {self.where} is full ({_size(self.free)} free){done}: "
                "free space there (or set sweep.runs_dir / sweep.storage elsewhere), then run "
                "the same command again to resume")


class ServerDiskFull(DiskFull):
    """The database server's disk is full (PostgreSQL's SQLSTATE 53100): not ours to see."""

    def __str__(self) -> str:
        done = "".join(f"; {c}" for c in self.consequences)
        return (f"the disk of the database server {self.where} is full{done}: free space on "
                "the server, then run the same command again to resume")


def is_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _FULL


@contextlib.contextmanager
def full_is_diskfull(where: Path) -> Iterator[None]:
    """Inside the block, a write refused for want of space raises :class:`DiskFull`."""
    try:
        yield
    except OSError as exc:
        if is_full(exc):
            raise DiskFull(Path(exc.filename).parent if exc.filename else where) from exc
        raise


def check_room(where: Path) -> None:
    """DiskFull when less than :data:`MIN_FREE_BYTES` is left under ``where``."""
    free = free_bytes(where)
    if free is not None and free < MIN_FREE_BYTES:
        raise DiskFull(where, free=free)


class Reserve:
    """A file of :data:`RESERVE_BYTES` in the study directory, given up when the disk fills
    (so that the sweep can still record why it stopped), removed when the sweep ends."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / ".disk-reserve"

    def hold(self) -> None:
        """Write the reserve (DiskFull when even that does not fit)."""
        if self.path.exists() and self.path.stat().st_size >= RESERVE_BYTES:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb") as handle:
                # Written, not sparse: the blocks must really be taken from the free space.
                handle.write(b"\0" * RESERVE_BYTES)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            self.release()
            if is_full(exc):
                raise DiskFull(self.path.parent) from exc
            raise

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
