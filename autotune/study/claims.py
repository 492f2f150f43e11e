"""One launch claim at a time per study, across threads, processes and machines.

Several orchestrators (``sweep.parallel_trials`` threads, or workers on one
PostgreSQL study) decide "may I launch this configuration now?" by reading the
study and then writing to it. Without mutual exclusion two of them read the same
state, both see room in the budget or both miss the other's running twin, and
the study ends with more launches than ``sweep.n_trials`` or one configuration
run twice (seen: three workers, budget 5, one duplicate).

The lock is taken in the storage itself, so it holds wherever the study is:

* PostgreSQL: a session advisory lock keyed by the study name
  (``pg_advisory_lock``). It lives on one connection of this process and is
  released when that connection ends, so a worker killed inside the critical
  section frees it.
* SQLite: an exclusive ``flock`` on a file beside the database. An exclusive
  SQLite transaction would also serialise claims, but the claim writes through
  Optuna's own connection, which would then wait on our transaction; SQLite
  lives on one machine, where ``flock`` gives the same exclusion (and the kernel
  drops it when the process dies).

The same locks, by other keys, make the work a study needs once one worker's
(:func:`task_lock`: the final race, the winner's profile; held for minutes, not a moment).

The critical section is short: read the study, write one attribute. A database lost
inside it (a restart drops the lock with the connection) is waited out by the caller,
which runs the whole claim again (:meth:`autotune.study.surviving.Outage.call`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna
import sqlalchemy
from sqlalchemy.pool import NullPool

from autotune.study.layout import sqlite_path

#: Threads of one process take their kind's lock first: each thread's storage connection
#: is its own.
_THREAD_LOCKS = {"launch": threading.Lock(), "attribute": threading.RLock(),
                 "task": threading.Lock()}
_ENGINES: dict[str, sqlalchemy.Engine] = {}


def lock_key(study: str, purpose: str = "launch") -> int:
    """A signed 64-bit key for the study's lock of ``purpose`` (PostgreSQL's advisory lock
    space)."""
    digest = hashlib.sha1(f"autotune-{purpose}:{study}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _engine(url: str, connect_args: dict) -> sqlalchemy.Engine:
    if url not in _ENGINES:
        _ENGINES[url] = sqlalchemy.create_engine(url, poolclass=NullPool,
                                                 connect_args=connect_args)
    return _ENGINES[url]


@contextlib.contextmanager
def launch_lock(url: str, study: str, *, connect_args: dict | None = None) -> Iterator[None]:
    """Hold the study's launch lock for the ``with`` block (blocks until it is free);
    ``connect_args`` are the storage engine's (its connect timeout)."""
    with _study_lock(url, study, "launch", connect_args or {}):
        yield


@contextlib.contextmanager
def attribute_lock(study: optuna.Study, key: str) -> Iterator[None]:
    """Hold the lock of one study attribute ``key`` for a read-modify-write of it (two
    writers, e.g. confirm beside a sweep on one PostgreSQL study, then never lose each
    other's entries). A storage that names no URL (Optuna's in-memory one) has one writer."""
    with _lock_of(study, f"attribute:{key}"):
        yield


@contextlib.contextmanager
def task_lock(study: optuna.Study, task: str, *,
              on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Hold the study's lock of ``task`` for the ``with`` block: work a study needs done
    once, which every worker on a shared study reaches at its end (the final race, the
    winner's profile). One does it; the others wait for it (``on_wait`` is called once,
    before waiting), then find it done. Held for the task's minutes; a worker killed in it
    frees it (its process's file lock, its connection's advisory lock), and the next
    holder does only what it left."""
    with _lock_of(study, f"task:{task}", on_wait):
        yield


@contextlib.contextmanager
def _lock_of(study: optuna.Study, purpose: str,
             on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    storage = getattr(study, "_storage", None)
    storage = getattr(storage, "_backend", storage)  # Optuna's cache wraps the RDB storage
    url = getattr(storage, "url", None)
    if not isinstance(url, str):
        yield
        return
    connect_args = (getattr(storage, "engine_kwargs", None) or {}).get("connect_args", {})
    with _study_lock(url, study.study_name, purpose, connect_args, on_wait):
        yield


def update_attribute(study: optuna.Study, key: str, change: Callable[[dict], None]) -> None:
    """Read one dict-valued study attribute, ``change`` it in place and write it back, all
    under the attribute's lock: the one way every stored blob keyed by trial or name is
    updated, so two writers (two confirms, confirm beside a sweep, profile beside report)
    never write back each other's older copy."""
    with attribute_lock(study, key):
        stored = dict(study.user_attrs.get(key) or {})
        change(stored)
        study.set_user_attr(key, stored)


@contextlib.contextmanager
def _study_lock(url: str, study: str, purpose: str, connect_args: dict,
                on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    kind = purpose.split(":")[0]
    with _THREAD_LOCKS[kind]:
        if (db := sqlite_path(url)) is not None:
            # Every attribute shares one file; each task has its own.
            name = purpose.replace(":", "-") if kind == "task" else kind
            with _file_lock(db.with_suffix(f".{name}-lock"), on_wait):
                yield
        elif url.startswith("postgresql"):
            with _engine(url, connect_args).connect() as con:
                key = {"k": lock_key(study, purpose)}
                if not con.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:k)"),
                                   key).scalar():
                    on_wait()
                    con.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), key)
                try:
                    yield
                finally:
                    # A connection lost meanwhile took the lock with it.
                    with contextlib.suppress(sqlalchemy.exc.SQLAlchemyError):
                        con.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), key)
        else:  # no other storage is opened (autotune/study/urls.py): this process only
            yield


@contextlib.contextmanager
def _file_lock(path: Path, on_wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
