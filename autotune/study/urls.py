"""Storage URLs as they may be shown: every message and file that names the study's
database goes through :func:`redact`.

A password may hold any character, also an unescaped ``@``, ``:`` or ``/``
(``postgresql://me:p@ss/w:rd@db:5432/study``), so the password is not found by a
pattern that stops at the first ``@``: the credentials of a URL run from after
``scheme://`` to its *last* ``@`` (host names, ports and database names hold none), and the
password is what follows the user name's ``:``. Taking the last ``@`` errs on the safe
side: an ``@`` further on (in a query string) masks more, never less. libpq also takes a
password as a query parameter (``?password=...``); that is masked too.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)


def _password(url: str) -> str | None:
    """The password as this module reads it (everything between the user's ``:`` and the
    last ``@``), or None."""
    _, sep, rest = url.partition("://")
    if not sep or rest.startswith("/"):
        return None
    credentials, at, _ = rest.rpartition("@")
    user, colon, password = credentials.partition(":")
    return password if at and colon else None


def ambiguity(url: str) -> str | None:
    """Why SQLAlchemy would read another password out of ``url`` than the one written (an
    unescaped ``@`` or ``/`` in it: the driver would then take part of the password for
    the host name, and quote it in its errors), or None."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    password = _password(url)
    if password is None:
        return None
    try:
        parsed = make_url(url).password
    except (ArgumentError, ValueError):
        parsed = None
    if parsed is not None and str(parsed) == unquote(password):
        return None
    return ("the password in sweep.storage holds a character a URL reserves ('@', '/', "
            "'?', '#' or '%'): percent-encode it (@ as %40, / as %2F, ? as %3F, # as %23, "
            "% as %25)")


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with the URL's password masked."""
    password = _password(url)
    for secret in {password, unquote(password)} if password else ():
        text = text.replace(secret, MASK)
    return text


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``: safe to print or write."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    if rest.startswith("/"):  # sqlite:////abs/path: no network location, no credentials
        return url
    credentials, at, location = rest.rpartition("@")
    if at:
        user, colon, _password = credentials.partition(":")
        rest = f"{user}:{MASK}@{location}" if colon else f"{user}@{location}"
    return f"{scheme}://{_QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, rest)}"


#: The storages autotune runs on, each installed with the project and tested
#: (tests/study/test_storage_faults.py, tests/running/test_concurrent_trials.py): URL
#: scheme -> how to write one. A plain ``postgresql://`` is read as psycopg2's
#: (:func:`with_driver`): SQLAlchemy 2.1 takes it as psycopg 3's, which is not installed.
SUPPORTED_STORAGES = {
    "sqlite": "sqlite:////abs/path/study.db (a file; the default, under sweep.runs_dir)",
    "postgresql+psycopg2": "postgresql+psycopg2://user@host:5432/db",
    "postgresql": "postgresql://user@host:5432/db",
}
#: What names SQLite's in-memory database: the study would end with the command.
_IN_MEMORY = re.compile(r"^sqlite://(/:memory:|/?$|.*[?&]mode=memory)")


#: The PostgreSQL driver installed with the project (pyproject.toml: psycopg2-binary).
POSTGRESQL_DRIVER = "postgresql+psycopg2"


def with_driver(url: str) -> str:
    """``url`` naming the installed driver where it names none: ``postgresql://...`` is
    ``postgresql+psycopg2://...`` (Optuna's docs and most users write the former; SQLAlchemy
    2.1 reads it as psycopg 3's and failed with "No module named 'psycopg'")."""
    scheme, sep, rest = url.partition("://")
    return f"{POSTGRESQL_DRIVER}://{rest}" if sep and scheme == "postgresql" else url


def unsupported(url: str) -> str | None:
    """Why the study cannot live at ``url`` (a scheme not in SUPPORTED_STORAGES, or an
    in-memory database), naming what to write instead; None when it can."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return None  # not a URL at all: the caller says so
    if scheme not in SUPPORTED_STORAGES:
        shapes = "; ".join(dict.fromkeys(SUPPORTED_STORAGES.values()))
        return (f"sweep.storage: {scheme}:// is not a storage autotune supports (only these "
                f"are installed and tested: {shapes})")
    if _IN_MEMORY.match(url):
        return ("sweep.storage: an in-memory SQLite database ends with the command, and "
                "every result with it: name a file, e.g. sqlite:////abs/path/study.db")
    return None
