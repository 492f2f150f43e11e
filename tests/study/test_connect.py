"""autotune.study.connect: PostgreSQL connections give up in time; other databases are
left alone."""

from __future__ import annotations

import pytest

from autotune.study.connect import engine_kwargs, is_postgresql


def test_only_postgresql_urls_get_connect_arguments():
    # Rule: both spellings of PostgreSQL are recognised; SQLite and MySQL are not.
    assert is_postgresql("postgresql+psycopg2://u@h/db") and is_postgresql("postgres://h/db")
    assert not is_postgresql("sqlite:///x.db") and not is_postgresql("mysql://h/db")
    # Rule: another database gets no extra create_engine keywords.
    assert engine_kwargs("sqlite:///x.db", connect_timeout_s=5) == {}


def test_postgresql_gets_a_whole_second_timeout_keepalives_and_the_wait_callback():
    psycopg2 = pytest.importorskip("psycopg2")
    from autotune.study.connect import _wait

    kw = engine_kwargs("postgresql://u@h/db", connect_timeout_s=0.2)
    # Rule: libpq takes whole seconds and 0 means forever: at least 1 s.
    assert kw["connect_args"]["connect_timeout"] == 1
    assert engine_kwargs("postgresql://h/db", connect_timeout_s=7.4)[
        "connect_args"]["connect_timeout"] == 7
    # Rule: TCP keepalives on, and the pool checks a connection before using it.
    assert kw["connect_args"]["keepalives"] == 1 and kw["pool_pre_ping"] is True
    # Rule: the wait callback that lets a signal through is installed.
    assert psycopg2.extensions.get_wait_callback() is _wait
