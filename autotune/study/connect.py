"""Connections to a database server that give up in time and let a signal through.

Two failure modes of a plain ``psycopg2.connect`` end here:

* a server that accepts the connection and never answers (a port that is not
  PostgreSQL, a stopped server) is waited for forever: libpq has no timeout unless
  ``connect_timeout`` is given;
* while libpq blocks in C, Python runs no signal handler, so SIGTERM and SIGINT are
  ignored until the call returns.

:func:`engine_kwargs` gives every PostgreSQL engine a ``connect_timeout`` and TCP
keepalives (a server host that vanished mid-query is noticed in about half a minute),
and installs :func:`_wait`, a psycopg2 wait callback: psycopg2 then runs libpq's
non-blocking API and waits in ``select`` here, where a signal handler runs (and raises
:class:`autotune.signals.Stopped`). The callback enforces the connection's
``connect_timeout`` itself, because libpq applies it only to its own blocking connect.
It is the documented way to make psycopg2 interruptible
(psycopg.org/docs/extensions.html#psycopg2.extensions.set_wait_callback).
"""

from __future__ import annotations

import select
import time
from typing import Any

#: TCP keepalives (libpq parameters): probe after 10 s idle, every 5 s, give up after 3.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
               "keepalives_count": 3}


def is_postgresql(url: str) -> bool:
    return url.startswith(("postgresql", "postgres"))


def engine_kwargs(url: str, *, connect_timeout_s: float) -> dict[str, Any]:
    """SQLAlchemy ``create_engine`` keywords for the study's database at ``url``."""
    if not is_postgresql(url):
        return {}
    install_wait_callback()
    # libpq takes whole seconds; 0 would mean "wait forever".
    timeout = max(1, round(connect_timeout_s))
    return {"pool_pre_ping": True,
            "connect_args": {"connect_timeout": timeout, **_KEEPALIVES}}


def install_wait_callback() -> None:
    import psycopg2.extensions

    if psycopg2.extensions.get_wait_callback() is not _wait:
        psycopg2.extensions.set_wait_callback(_wait)


def _connect_timeout(conn) -> float | None:
    import psycopg2.extensions

    value = psycopg2.extensions.parse_dsn(conn.dsn).get("connect_timeout")
    return float(value) if value else None


def _wait(conn) -> None:
    """Wait for psycopg2's pending operation on ``conn`` (a connect or a query)."""
    import psycopg2
    import psycopg2.extensions as ext

    connecting = conn.status not in (ext.STATUS_READY, ext.STATUS_BEGIN, ext.STATUS_PREPARED)
    timeout = _connect_timeout(conn) if connecting else None
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        state = conn.poll()
        if state == ext.POLL_OK:
            return
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise psycopg2.OperationalError(
                f"timeout expired: no answer within connect_timeout={timeout:g} s")
        if state == ext.POLL_READ:
            select.select([conn.fileno()], [], [], left)
        elif state == ext.POLL_WRITE:
            select.select([], [conn.fileno()], [], left)
        else:
            raise psycopg2.OperationalError(f"bad state from poll: {state}")
