"""What a storage error means: a database that will be back (retry), a full disk or a
read-only database (stop cleanly), or anything else (a real error).

Decided from the drivers' structured codes, not from message text: SQLite's result
code (``sqlite3.Error.sqlite_errorcode``) and PostgreSQL's SQLSTATE (``pgcode``).
Optuna wraps a driver error raised inside its session in ``StorageInternalError``
("... e.g. exceeding max length"), so the whole ``__cause__``/``__context__`` chain
is read.
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Iterator

import sqlalchemy.exc


class Fault(enum.Enum):
    TRANSIENT = "transient"  # connection refused or lost, server restarting, a lock
    DISK_FULL = "disk_full"
    READ_ONLY = "read_only"  # a read-only file or mount, a standby server: no write passes


#: SQLite: SQLITE_BUSY / SQLITE_LOCKED ("database is locked") pass; SQLITE_FULL does not.
_SQLITE = {sqlite3.SQLITE_BUSY: Fault.TRANSIENT, sqlite3.SQLITE_LOCKED: Fault.TRANSIENT,
           sqlite3.SQLITE_FULL: Fault.DISK_FULL, sqlite3.SQLITE_READONLY: Fault.READ_ONLY}
#: PostgreSQL SQLSTATE classes and codes (postgresql.org/docs/current/errcodes-appendix.html):
#: 08 connection exception, 57P01-57P03 admin/crash shutdown and "cannot connect now"
#: (a restart or a failover), 40001/40P01 serialization failure and deadlock, 55P03 lock
#: not available, 53100 disk full, 25006 read-only transaction (a standby after failover).
_PG_CODES = {"57P01": Fault.TRANSIENT, "57P02": Fault.TRANSIENT, "57P03": Fault.TRANSIENT,
             "40001": Fault.TRANSIENT, "40P01": Fault.TRANSIENT, "55P03": Fault.TRANSIENT,
             "53100": Fault.DISK_FULL, "25006": Fault.READ_ONLY}
_PG_CLASSES = {"08": Fault.TRANSIENT}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def fault_of(exc: BaseException) -> Fault | None:
    """The kind of storage fault ``exc`` is, or None for an error that is not one."""
    for link in _chain(exc):
        if isinstance(link, sqlite3.Error):  # SQLite says exactly what it was
            code = getattr(link, "sqlite_errorcode", None)
            # Extended codes (SQLITE_READONLY_DBMOVED...) carry the primary in the low byte.
            return _SQLITE.get(code) or (_SQLITE.get(code & 0xFF) if code else None)
        code = getattr(link, "pgcode", None)
        if isinstance(code, str) and code:
            return _PG_CODES.get(code) or _PG_CLASSES.get(code[:2])
    for link in _chain(exc):
        if isinstance(link, sqlalchemy.exc.DBAPIError) and link.connection_invalidated:
            return Fault.TRANSIENT
        # A connection-level failure carries no SQLSTATE (refused, reset, timed out, the
        # server closed the connection): the driver's OperationalError / InterfaceError.
        if isinstance(link, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError):
            return Fault.TRANSIENT
    return None


def driver_words(exc: BaseException) -> str:
    """The first line of what the database driver said (not Optuna's wrapper of it)."""
    links = list(_chain(exc))
    driver = next((link.orig for link in links
                   if isinstance(link, sqlalchemy.exc.DBAPIError) and link.orig), links[-1])
    text = str(driver).strip()
    return text.splitlines()[0] if text else type(driver).__name__
