"""A study storage that outlives what a database does: a restart, a failover, a lock.

:class:`SurvivingStorage` is Optuna's ``RDBStorage`` whose every call retries a
transient fault (:mod:`autotune.study.faults`) with exponential backoff, for up to
``sweep.storage_retry_s`` from the moment the storage was lost; a full disk raises
:class:`autotune.study.disk.DiskFull` at once. It is built in one place
(:func:`autotune.study.storage.open_storage`), so the sweep loop, the heartbeat, ``tell``
and the reaper need no ``try`` of their own: a call simply returns later. While it
waits the running trial keeps running (it is a process of its own); the console says
in one line when the storage is lost and when it is back.

Only the outermost call retries (Optuna's calls nest: ``create_new_trial`` calls
``_create_new_trial``), so one outage is waited out once. A write whose commit reached
the server just before the connection dropped is sent again; for a trial's final
state that would read as "already finished", which :meth:`set_trial_state_values`
recognises as its own earlier write.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RDBStorage

from autotune.study.disk import DiskFull, ServerDiskFull
from autotune.study.faults import Fault, driver_words, fault_of
from autotune.study.layout import sqlite_path
from autotune.study.urls import redact, scrub

log = logging.getLogger(__name__)

#: First wait after a failed call, and the longest wait between two attempts (seconds).
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 5.0


class StorageLost(Exception):
    """The storage stayed unreachable past ``sweep.storage_retry_s``, or can no longer be
    written (the subclasses): the command stops with this one line."""


class StorageReadOnly(StorageLost):
    """The storage refuses writes (a read-only file or mount, a standby server)."""


class StorageGone(StorageLost):
    """The SQLite file was deleted while the command ran (a new connection would start an
    empty study in its place and lose every trial)."""


def _first_line(exc: BaseException, url: str) -> str:
    return scrub(driver_words(exc), url)[:200]


class Outage:
    """One database's availability, shared by every thread of this process: when it was
    lost, and the one line said when it is lost and when it is back."""

    def __init__(self, url: str, *, retry_s: float,
                 note: Callable[[str], None] = log.warning) -> None:
        self.url = url
        self.shown = redact(url)
        self.retry_s = retry_s
        #: Where a full disk is reported: the SQLite file's directory, or None (a server).
        db = sqlite_path(url)
        self.local_dir = db.parent if db is not None else None
        #: The SQLite file, watched once the storage has opened it (``opened``).
        self.db, self.opened = db, False
        self.note = note
        self.lost_since: float | None = None
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextlib.contextmanager
    def patience(self, seconds: float) -> Iterator[None]:
        """Wait at most ``seconds`` for the storage inside the block (a clean-up on the way
        out must not hold a stopping command for the whole retry budget)."""
        before = getattr(self._local, "patience", None)
        self._local.patience = seconds
        try:
            yield
        finally:
            self._local.patience = before

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, retried across transient faults of the storage."""
        if getattr(self._local, "depth", 0):
            return fn(*args, **kwargs)  # an outer call retries the whole of it
        self._local.depth = 1
        try:
            return self._retrying(fn, *args, **kwargs)
        finally:
            self._local.depth = 0

    def _retrying(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        delay = FIRST_DELAY_S
        first_failure: float | None = None
        while True:
            if self.db is not None and self.opened and not self.db.exists():
                raise StorageGone(
                    f"the study database {self.db} was deleted while this command ran: the "
                    "trials it held are gone unless it is restored (from a backup); nothing "
                    "more was written; restore it and run the same command again to resume")
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised if not ours
                fault = fault_of(exc)
                if fault is Fault.DISK_FULL:
                    if self.local_dir is None:
                        raise ServerDiskFull(self.shown, free=0) from exc
                    raise DiskFull(self.local_dir) from exc
                if fault is Fault.READ_ONLY:
                    raise StorageReadOnly(
                        f"storage {self.shown} is read-only ({_first_line(exc, self.url)}): "
                        "every finished trial is stored; make it writable (the file's "
                        "permissions, a read-only mount, a standby server) and run the same "
                        "command again to resume") from exc
                if fault is not Fault.TRANSIENT:
                    raise
                first_failure = first_failure or time.monotonic()
                left = self._lost(exc, first_failure)
                time.sleep(min(delay, left))
                delay = min(2 * delay, MAX_DELAY_S)
                continue
            self._back()
            return result

    def _lost(self, exc: BaseException, first_failure: float) -> float:
        """Say the storage is lost (once); the seconds left to retry, or StorageLost."""
        now = time.monotonic()
        with self._lock:
            if self.lost_since is None:
                self.lost_since = now
                self.note(f"storage {self.shown} lost ({_first_line(exc, self.url)}); "
                          f"retrying for up to {self.retry_s:g} s (sweep.storage_retry_s); a "
                          "running trial keeps running")
            lost_since = self.lost_since
        budget = self.retry_s
        patience = getattr(self._local, "patience", None)
        left = budget - (now - lost_since)
        if patience is not None:
            left = min(left, patience - (now - first_failure))
        if left <= 0:
            raise StorageLost(
                f"storage {self.shown} unreachable for {now - lost_since:.0f} s "
                f"({_first_line(exc, self.url)}): check that the database is up and "
                "reachable from here (or raise sweep.storage_retry_s), then run the same "
                "command again to resume; a trial left RUNNING is re-queued then") from exc
        return left

    def _back(self) -> None:
        if self.lost_since is None:
            return
        with self._lock:
            if self.lost_since is None:
                return
            away = time.monotonic() - self.lost_since
            self.lost_since = None
        self.note(f"storage {self.shown} is back after {away:.1f} s")


#: The RDBStorage calls that reach the database: the public storage API and the private
#: ones Optuna's cache (``_CachedStorage``, which wraps every RDBStorage) calls directly.
_CALLS = (
    "create_new_study", "delete_study", "set_study_user_attr", "set_study_system_attr",
    "get_study_id_from_name", "get_study_name_from_id", "get_study_directions",
    "get_study_user_attrs", "get_study_system_attrs", "get_all_studies",
    "create_new_trial", "_create_new_trial", "set_trial_param", "_set_trial_param",
    "get_trial_param", "set_trial_intermediate_value", "set_trial_user_attr",
    "set_trial_system_attr", "get_trial_user_attrs", "get_trial_system_attrs",
    "get_trial_id_from_study_id_trial_number", "get_trial", "get_all_trials", "_get_trials",
    "get_best_trial", "_get_best_trial_id", "get_n_trials", "get_trial_number_from_id",
    "get_trial_params", "record_heartbeat", "_get_stale_trial_ids",
)


class SurvivingStorage(RDBStorage):
    """``RDBStorage`` whose calls wait out a lost database (see the module docstring)."""

    def __init__(self, url: str, *, outage: Outage, engine_kwargs: dict[str, Any]) -> None:
        self.outage = outage
        super().__init__(url, engine_kwargs=engine_kwargs)
        outage.opened = True  # the file exists from here on: its loss is a fault

    def set_trial_state_values(self, trial_id: int, state, values=None) -> bool:
        attempts = 0

        def finish() -> bool:
            nonlocal attempts
            attempts += 1
            try:
                return RDBStorage.set_trial_state_values(self, trial_id, state, values)
            except UpdateFinishedTrialError:
                # Sent again after a lost connection: finished as asked is our own write.
                if attempts > 1 and RDBStorage.get_trial(self, trial_id).state == state:
                    return True
                raise

        return self.outage.call(finish)


def _surviving(name: str) -> Callable[..., Any]:
    method = getattr(RDBStorage, name)

    @functools.wraps(method)
    def call(self: SurvivingStorage, *args: Any, **kwargs: Any) -> Any:
        return self.outage.call(method, self, *args, **kwargs)

    return call


for _name in _CALLS:
    if hasattr(RDBStorage, _name):  # a name a later Optuna dropped is simply not wrapped
        setattr(SurvivingStorage, _name, _surviving(_name))
