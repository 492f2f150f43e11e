"""The study in its database: check and open the storage, create or resume the study,
and refuse a resume whose search space, workload, hardware or measurement changed.

Several orchestrators may share one study (e.g. on PostgreSQL): nothing here
assumes it is the only writer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import optuna

from autotune.presentation.invocation import autotune_command
from autotune.settings import Objective, SweepSettings
from autotune.study.connect import engine_kwargs
from autotune.study.disk import DiskFull, check_room
from autotune.study.faults import Fault, fault_of
from autotune.study.layout import StudyLayout, sqlite_path
from autotune.study.schema.keys import FINGERPRINT, FINGERPRINT_PARTS, STOP_RULES  # noqa: F401
from autotune.study.surviving import Outage, SurvivingStorage
from autotune.study.urls import ambiguity, redact, scrub, unsupported, with_driver
from trials.contract.schema import ConfigError

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def same_study(settings: SweepSettings) -> str:
    """The overrides another command needs to find this study ("" for the default one):
    what a printed follow-up command (``python -m autotune profile ...``) must carry, or it
    reads another study. A password in the storage URL is printed as ``***``."""
    default = SweepSettings()
    parts = [f"sweep.study={settings.study}" if settings.study != default.study else "",
             f"sweep.storage={redact(settings.storage)}" if settings.storage else "",
             f"sweep.runs_dir={settings.runs_dir}"
             if settings.runs_dir != default.runs_dir else ""]
    return " ".join(p for p in parts if p)


def check_study_name(name: str) -> None:
    if not _SAFE_NAME.match(name) or ".." in name:
        raise ConfigError(f"sweep.study={name!r} is not a safe directory name: use letters, "
                          "digits, '.', '_' and '-' (e.g. sweep.study=gpt_small_cpu)")


def study_dir(settings: SweepSettings) -> Path:
    """The study's directory (its layout: :class:`autotune.study.layout.StudyLayout`)."""
    return StudyLayout.of(settings).root


def storage_url(settings: SweepSettings) -> str:
    """The study's storage URL: ``sweep.storage`` with the installed driver named
    (:func:`with_driver`), else the SQLite file under ``sweep.runs_dir``."""
    if settings.storage:
        return with_driver(settings.storage)
    return StudyLayout.of(settings).storage_url


def check_runs_dir(settings: SweepSettings) -> None:
    """Fail early, writing nothing, when the run directory cannot be written."""
    target = study_dir(settings)
    probe = target
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write under {probe}: choose a writable sweep.runs_dir=PATH")
    check_room(probe)  # a full disk: said now, before anything is created


def _check_sqlite_location(path: Path, *, create: bool) -> None:
    """The database must be a file in a directory we can create or write."""
    if path.is_dir():
        raise ConfigError(f"sweep.storage points at a directory ({path}): name a file, "
                          "e.g. sqlite:////abs/path/study.db")
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"cannot create the study database {path}: {ancestor} is a file, "
                          "not a directory; fix sweep.storage")
    if create and not path.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot create the study database {path}: {ancestor} is not "
                          "writable; fix sweep.storage")


#: Seconds the check of an existing database waits for another process's write lock.
LOCK_WAIT_S = 5.0


def _check_sqlite_file(path: Path) -> None:
    """An existing file must be an Optuna database; never write into a foreign one."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
        try:
            rows = con.execute("select name from sqlite_master where type='table'")
            tables = {r[0] for r in rows}
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            # Another process (a worker of the same study) held a write lock past the wait:
            # the file is a SQLite database in use, not a foreign one; Optuna's storage
            # waits for the lock itself.
            return
        raise ConfigError(f"{path} is not a SQLite database ({exc}): move it away or choose "
                          "another sweep.study / sweep.storage") from exc
    if "studies" not in tables or "trials" not in tables:
        raise ConfigError(f"{path} is a SQLite database but not an Optuna study database: "
                          "choose another sweep.study or sweep.storage")


def _check_rdb(url: str, kwargs: dict) -> None:
    """Reachable, and either empty or an Optuna schema."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    try:
        engine = sqlalchemy.create_engine(url, poolclass=NullPool,
                                          connect_args=kwargs.get("connect_args", {}))
        with engine.connect():
            tables = set(sqlalchemy.inspect(engine).get_table_names())
    except Exception as exc:  # noqa: BLE001 - drivers raise many types
        cause = getattr(exc, "orig", None) or exc
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(exc).__name__
        raise ConfigError(f"cannot reach study storage {redact(url)} "
                          f"({scrub(first, url)[:200]}): {_reach_fix(url, first)}") from exc
    if tables and not {"studies", "trials"} <= tables:
        raise ConfigError(f"storage {redact(url)} holds tables of another application: "
                          "use an empty database for sweep.storage")


def _reach_fix(url: str, first: str) -> str:
    """What to do about a server that did not let us in: a database that is not there yet
    (the first run against a new server) is created once, with the command that does it;
    anything else is the URL, the server or the network."""
    if "database" in first and "does not exist" in first:
        import sqlalchemy

        u = sqlalchemy.engine.make_url(url)
        who = f" -U {u.username}" if u.username else ""
        return (f"create it once on the server: createdb -h {u.host or 'localhost'} "
                f"-p {u.port or 5432}{who} {u.database}")
    return ("check sweep.storage, that the server is up and that this host speaks to its "
            "port (sweep.storage_connect_timeout_s)")


def naming_overrides(settings: SweepSettings) -> list[str]:
    """The overrides that name this study where it differs from the default one: a hint to
    run ``sweep`` must create this study, not the default (a `report sweep.study=mine`
    without it was told to run a plain `sweep`)."""
    default = SweepSettings()
    return [f"sweep.{name}={getattr(settings, name)}" for name in ("study", "runs_dir")
            if getattr(settings, name) != getattr(default, name)]


def open_storage(settings: SweepSettings, *, create: bool) -> SurvivingStorage:
    """The study's storage, checked (ConfigError: one line) and built to outlive a
    database restart (:mod:`autotune.study.surviving`)."""
    url = storage_url(settings)
    if problem := unsupported(url):
        raise ConfigError(problem)
    kwargs = engine_kwargs(url, connect_timeout_s=settings.storage_connect_timeout_s)
    path = sqlite_path(url)
    if path is not None:
        _check_sqlite_location(path, create=create)
        _check_sqlite_file(path)
        if not path.exists() and not create:
            raise ConfigError(f"no study database at {path}: run "
                              f"`{autotune_command('sweep', *naming_overrides(settings))}` "
                              "first or set sweep.study / sweep.storage")
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
    elif "://" in url:
        if problem := ambiguity(url):
            raise ConfigError(problem)
        _check_rdb(url, kwargs)
    else:
        raise ConfigError(f"sweep.storage={redact(url)!r} is not a database URL "
                          "(e.g. postgresql+psycopg2://user@host:5432/db)")
    outage = Outage(url, retry_s=settings.storage_retry_s)
    for attempt in range(5):
        try:
            return SurvivingStorage(url, outage=outage, engine_kwargs=kwargs)
        except Exception as exc:  # noqa: BLE001
            if fault_of(exc) is Fault.DISK_FULL:
                raise DiskFull(outage.local_dir or study_dir(settings)) from exc
            # Workers starting together on an empty database race to create the schema;
            # the loser's CREATE fails, and a moment later the schema is there.
            if attempt == 4:
                raise ConfigError(f"cannot open study storage {redact(url)}: "
                                  f"{scrub(str(exc).splitlines()[0], url)[:200]}") from exc
            time.sleep(0.5 + random.random())
    raise AssertionError("unreachable")


def fingerprint(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def directions(objective: Objective) -> list[str]:
    if objective is Objective.pareto:
        return ["maximize", "minimize"]
    return ["maximize"]


def _check_distributions(study: optuna.Study, distributions: dict) -> None:
    """Optuna cannot change a categorical's choices within one study."""
    for trial in study.get_trials(deepcopy=False):
        for name, old in trial.distributions.items():
            new = distributions.get(name)
            if new is not None and new != old:
                raise ConfigError(
                    f"study {study.study_name!r} explored {name} over {list(old.choices)}; "
                    f"its values cannot change within a study: use a new sweep.study=NAME")


def load_or_create(settings: SweepSettings, storage, parts: dict[str, Any],
                   distributions: dict) -> optuna.Study:
    """Create the study, or resume it when its fingerprint matches (or the user allows)."""
    name = settings.study
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        try:
            study = optuna.create_study(study_name=name, storage=storage,
                                        directions=directions(settings.objective))
        except optuna.exceptions.DuplicatedStudyError:  # another worker created it just now
            time.sleep(0.5)
            return load_or_create(settings, storage, parts, distributions)
        study.set_user_attr(FINGERPRINT, fingerprint(parts))
        study.set_user_attr(FINGERPRINT_PARTS, json.loads(json.dumps(parts, default=str)))
        return study
    if list(study.directions) != [optuna.study.StudyDirection.MAXIMIZE
                                  if d == "maximize" else optuna.study.StudyDirection.MINIMIZE
                                  for d in directions(settings.objective)]:
        raise ConfigError(f"study {name!r} was created with another objective: keep "
                          f"sweep.objective as it was or use a new sweep.study")
    stored = study.user_attrs.get(FINGERPRINT)
    new = fingerprint(parts)
    if stored is not None and stored != new:
        old_parts = study.user_attrs.get(FINGERPRINT_PARTS, {})
        changed = sorted(k for k in set(old_parts) | set(parts)
                         if json.dumps(old_parts.get(k), sort_keys=True, default=str)
                         != json.dumps(parts.get(k), sort_keys=True, default=str))
        if not settings.allow_changed_space:
            raise ConfigError(
                f"study {name!r} was run with a different {', '.join(changed) or 'setup'} "
                f"(fingerprint {stored} != {new}): use a new sweep.study=NAME, or "
                "sweep.allow_changed_space=true to continue it anyway")
        _check_distributions(study, distributions)
        log.warning("continuing study %s with a changed %s", name, ", ".join(changed))
        study.set_user_attr(FINGERPRINT, new)
        study.set_user_attr(FINGERPRINT_PARTS, json.loads(json.dumps(parts, default=str)))
    return study


def load_existing(settings: SweepSettings) -> optuna.Study:
    """Open a study that a sweep created; ConfigError (one line) when there is none."""
    check_study_name(settings.study)
    storage = open_storage(settings, create=False)
    try:
        return optuna.load_study(study_name=settings.study, storage=storage)
    except KeyError as exc:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise ConfigError(f"no study {settings.study!r} in {redact(storage_url(settings))} "
                          f"(it has: {', '.join(names) or 'none'}): set sweep.study") from exc
