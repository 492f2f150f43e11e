"""What a database and a disk do to a sweep: a PostgreSQL restart mid-trial, a server that
never answers, a worker whose trial was taken over, a disk that fills, and passwords that
never leave the URL (autotune/study/surviving.py, faults.py, connect.py, disk.py, urls.py).

The faults are real where they can be: a private PostgreSQL server (initdb/pg_ctl in a
temporary directory, on a port of its own, so the shared server is never disturbed) is
restarted under a running sweep; a socket that accepts and never answers stands for a
port that is not PostgreSQL; a small tmpfs fills up.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy
from optuna.trial import TrialState

from autotune.study.faults import Fault, fault_of
from autotune.study.surviving import Outage, StorageLost
from autotune.study.urls import ambiguity, redact
from tests.conftest import ROOT, project_env

#: Long enough to restart a server or stop a worker under it, short enough for a test.
SLOW_TRIAL = {"steps": 40, "step_sleep": 0.15}
FAST_TRIAL = {"steps": 4, "step_sleep": 0.02}
QUICK_BEATS = ["sweep.heartbeat_interval_s=0.3", "sweep.heartbeat_timeout_s=2",
               "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0",
               "sweep.baseline_every=0", "sweep.sampler=random"]


# -- passwords ----------------------------------------------------------------------------
@pytest.mark.parametrize("url, secret", [
    ("postgresql://postgres:Zq9Secr3tPw@@host/db", "Zq9Secr3tPw"),
    ("postgresql+psycopg2://me:p@ss/w:rd@db:5432/study", "p@ss/w:rd"),
    ("postgresql://me:a:b@db/study", "a:b"),
    ("mysql+pymysql://me:x%40y@db/study", "x%40y"),
    ("postgresql://me@db/study?sslmode=require&password=hunter2", "hunter2"),
])
def test_a_password_of_any_characters_is_masked(url, secret):
    shown = redact(url)
    # Rule: no part of the password survives, whatever characters it holds.
    assert secret not in shown and "***" in shown
    assert shown.split("://")[0] == url.split("://")[0] and "db" in shown


def test_urls_without_a_password_are_shown_as_they_are():
    for url in ("sqlite:////tmp/a@b/study.db", "postgresql://me@db:5432/study", "nourl"):
        assert redact(url) == url


def test_a_password_sqlalchemy_would_split_is_refused_with_the_fix():
    # Rule: an unescaped '@' makes the driver take part of the password for the host.
    assert "percent-encode" in ambiguity("postgresql://me:p@ss@db/study")
    assert ambiguity("postgresql://me:p%40ss@db/study") is None
    assert ambiguity("postgresql://me:a/b:c@db/study") is None


# -- what a storage error is ----------------------------------------------------------------
def _locked_sqlite_error(tmp_path) -> BaseException:
    db = tmp_path / "locked.db"
    holder = sqlite3.connect(db)
    holder.execute("create table t (x)")
    holder.execute("begin exclusive")
    engine = sqlalchemy.create_engine(f"sqlite:///{db}", connect_args={"timeout": 0})
    try:
        with engine.connect() as con:
            con.execute(sqlalchemy.text("select * from t"))
    except sqlalchemy.exc.OperationalError as exc:
        return exc
    finally:
        holder.close()
    raise AssertionError("the lock did not block")


def test_faults_are_told_apart_by_the_drivers_codes(tmp_path):
    assert fault_of(_locked_sqlite_error(tmp_path)) is Fault.TRANSIENT  # database is locked
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(sqlalchemy.exc.OperationalError) as missing:
        with engine.connect() as con:
            con.execute(sqlalchemy.text("select * from no_such_table"))
    # Rule: an SQL error is a real error, never retried.
    assert fault_of(missing.value) is None
    refused = sqlalchemy.create_engine("postgresql+psycopg2://u@127.0.0.1:9/x")
    with pytest.raises(sqlalchemy.exc.OperationalError) as down:
        refused.connect()
    assert fault_of(down.value) is Fault.TRANSIENT  # connection refused: a server restarting
    assert fault_of(ValueError("no")) is None


def test_an_outage_is_said_once_waited_out_and_given_up_past_its_budget(tmp_path):
    lines: list[str] = []
    outage = Outage("postgresql://me:pw@db/x", retry_s=30, note=lines.append)
    error = _locked_sqlite_error(tmp_path)
    attempts = iter([error, error, None])

    def flaky() -> str:
        failure = next(attempts)
        if failure is not None:
            raise failure
        return "done"

    assert outage.call(flaky) == "done"
    # Rule: one line when lost, one when back; the password is in neither.
    assert len(lines) == 2 and "lost" in lines[0] and "back" in lines[1]
    assert not any("pw" in line for line in lines)
    impatient = Outage("sqlite:///x.db", retry_s=0, note=lines.append)
    with pytest.raises(StorageLost, match="sweep.storage_retry_s"):
        impatient.call(lambda: (_ for _ in ()).throw(error))


# -- a private PostgreSQL server ------------------------------------------------------------
def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("pg_ctl")
    return Path(which).parent if which else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    """A PostgreSQL server of this test alone (trust auth), run as the postgres user when
    the tests run as root (the server refuses root)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="autotune-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        subprocess.run([*self.as_user, *argv], check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust",
                  "-U", "postgres")
        self.start()

    def running(self) -> bool:
        status = subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "-D",
                                 str(self.data), "status"], capture_output=True, timeout=60)
        return status.returncode == 0

    def start(self) -> None:
        if self.running():
            return
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.dir}")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
                  "-l", str(self.dir / "log"), "-w", "start")

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                  "stop")

    def url(self, password: str = "") -> str:
        credentials = f"postgres:{password}" if password else "postgres"
        return f"postgresql+psycopg2://{credentials}@127.0.0.1:{self.port}/postgres"

    def close(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres():
    bindir = _pg_bin()
    if bindir is None or not (bindir / "initdb").exists():
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) on this machine")
    server = PrivatePostgres(bindir)
    try:
        server.init()
        yield server
    finally:
        server.close()


def _sweep_argv(harness, space: str, *extra: str, study: str = "s") -> list[str]:
    return [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, *QUICK_BEATS, *extra, study=study)]


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _trial_started(harness, number: int, study: str = "s") -> bool:
    return (harness.runs / study / f"trial-{number:04d}" / "pid").exists()


def test_a_postgresql_restart_during_a_trial_is_waited_out(harness, postgres):
    """The server goes down for 3 s while trial 1 runs: the sweep says the storage is lost
    and back, finishes its budget, leaves nothing RUNNING and exits 0."""
    import optuna

    space = harness.space("pg", {"train.micro_batches": [1, 2, 4]})
    argv = _sweep_argv(harness, space, f"sweep.storage={postgres.url()}", "sweep.n_trials=2")
    sweep = subprocess.Popen(argv, cwd=ROOT, env=project_env(AUTOTUNE_FAKE=json.dumps(
        SLOW_TRIAL)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _trial_started(harness, 1) or sweep.poll() is not None, 120,
                  "trial 1 to start")
        assert sweep.poll() is None, sweep.communicate()
        postgres.stop()
        time.sleep(3)
    finally:
        postgres.start()  # the server is back whatever happened above
    out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, err
    assert "Traceback" not in err
    shown = redact(postgres.url())
    assert f"storage {shown} lost (" in out and f"storage {shown} is back after" in out
    trials = optuna.load_study(study_name="s", storage=postgres.url()).trials
    assert not [t for t in trials if t.state is TrialState.RUNNING]
    launched = [t for t in trials if t.user_attrs.get("launched")]
    assert len(launched) == 2 and all(t.state.is_finished() for t in launched)


def test_a_password_never_reaches_output_or_files(harness, postgres, tmp_path):
    """A password with '@', ':' and '/' (percent-encoded, as a URL must carry it): neither
    its written nor its decoded form is in a sweep's or an export's output or files."""
    secret = "p@ss:w/rd"
    encoded = "p%40ss%3Aw%2Frd"
    url = postgres.url(encoded)
    space = harness.space("pw", {"train.micro_batches": [1, 2]})
    harness.script(**FAST_TRIAL)
    code, out, err = harness.run(space, f"sweep.storage={url}", "sweep.n_trials=2",
                                 study="pw")
    assert code == 0, err
    from autotune.cli import main

    export_dir = tmp_path / "export"
    assert main(["export", *harness.overrides(space, f"sweep.storage={url}", study="pw"),
                 f"export.out={export_dir}"]) == 0
    printed = out + err + "".join(harness.capsys.readouterr())
    files = [p for p in [*harness.runs.rglob("*"), *export_dir.rglob("*")] if p.is_file()]
    for text in [printed, *(p.read_bytes().decode("utf-8", "replace") for p in files)]:
        assert secret not in text and encoded not in text
    assert "postgres:***@" in out


# -- a server that never answers ------------------------------------------------------------
class SilentListener:
    """Accepts connections and never says a word (a port that is not PostgreSQL)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent():
    listener = SilentListener()
    yield listener
    listener.close()


def test_a_server_that_never_answers_is_given_up_in_one_line(harness, silent):
    space = harness.space("silent", {"train.micro_batches": [1, 2]})
    url = f"postgresql+psycopg2://postgres:a%40b%2Fc%3Ad@127.0.0.1:{silent.port}/x"
    argv = _sweep_argv(harness, space, f"sweep.storage={url}",
                       "sweep.storage_connect_timeout_s=2")
    proc = subprocess.run(argv, cwd=ROOT, env=project_env(), capture_output=True, text=True,
                          timeout=120)
    assert silent.accepted.is_set()
    # Rule: it gives up (no hang), in one line that names what to check; nothing written.
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "connect_timeout" in proc.stderr and "sweep.storage" in proc.stderr
    assert "a%40b" not in proc.stderr + proc.stdout and "a@b" not in proc.stderr + proc.stdout
    assert not (harness.runs / "s").exists()


def test_sigterm_ends_a_command_waiting_for_a_silent_server(harness, silent):
    space = harness.space("silent", {"train.micro_batches": [1, 2]})
    url = f"postgresql+psycopg2://postgres@127.0.0.1:{silent.port}/x"
    # A connect timeout far beyond the wait below: only the signal can end it in time.
    argv = _sweep_argv(harness, space, f"sweep.storage={url}",
                       "sweep.storage_connect_timeout_s=120")
    proc = subprocess.Popen(argv, cwd=ROOT, env=project_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert silent.accepted.wait(60), "the command never connected"
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err


# -- a worker whose trial was taken over ----------------------------------------------------
def test_a_worker_whose_trial_was_taken_over_drops_its_result_and_goes_on(harness):
    """Worker A is stopped (SIGSTOP) past its heartbeat timeout; worker B takes its trial
    over and spends the budget; A, continued, says so in one line and ends cleanly."""
    space = harness.space("over", {"train.micro_batches": [1, 2, 4]})
    argv = _sweep_argv(harness, space, "sweep.n_trials=2")
    first = subprocess.Popen(argv, cwd=ROOT, env=project_env(AUTOTUNE_FAKE=json.dumps(
        SLOW_TRIAL)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _trial_started(harness, 0) or first.poll() is not None, 120,
                  "trial 0 to start")
        first.send_signal(signal.SIGSTOP)
        time.sleep(3)  # past sweep.heartbeat_timeout_s=2
        second = subprocess.run(argv, cwd=ROOT, env=project_env(AUTOTUNE_FAKE=json.dumps(
            FAST_TRIAL)), capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr
        assert "reaped 1 trial" in second.stdout
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert "Traceback" not in err and "UpdateFinishedTrialError" not in err
    assert "trial 0: taken over by another worker" in out
    trials = harness.study().trials
    assert not [t for t in trials if t.state is TrialState.RUNNING]
    assert trials[0].user_attrs.get("reason") == "orphaned"


# -- a full disk ----------------------------------------------------------------------------
@pytest.fixture
def small_disk():
    """A 24 MiB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    where = Path(tempfile.mkdtemp(prefix="autotune-disk-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        shutil.rmtree(where, ignore_errors=True)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 16))
                handle.flush()
        except OSError:
            pass
    return filler


def test_a_disk_that_fills_mid_sweep_stops_it_cleanly(harness, small_disk):
    import optuna

    space = harness.space("disk", {"train.micro_batches": [1, 2, 4]})
    runs = harness.runs = small_disk / "runs"
    argv = _sweep_argv(harness, space, "sweep.n_trials=3")
    sweep = subprocess.Popen(argv, cwd=ROOT, env=project_env(AUTOTUNE_FAKE=json.dumps(
        SLOW_TRIAL)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: (runs / "s" / "trial-0001" / "pid").exists() or sweep.poll() is not None,
              120, "trial 1 to start")
    filler = _fill(small_disk)
    out, err = sweep.communicate(timeout=120)
    # Rule: one line naming the directory and its free space, exit 1, no traceback.
    assert sweep.returncode == 1, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(runs / "s") in err and "free" in err and "re-queued" in err
    storage = f"sqlite:///{runs / 's' / 'study.db'}"
    trials = optuna.load_study(study_name="s", storage=storage).trials
    assert not [t for t in trials if t.state is TrialState.RUNNING]
    assert trials[1].user_attrs.get("reason") == "interrupted"
    assert [t for t in trials if t.state is TrialState.WAITING
            and t.user_attrs.get("retry_of") == 1]
    # Nothing half-written is left: the interrupted trial's directory is gone.
    assert not (runs / "s" / "trial-0001").exists()
    filler.unlink()
    resumed = subprocess.run(argv, cwd=ROOT, env=project_env(AUTOTUNE_FAKE=json.dumps(
        FAST_TRIAL)), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    after = optuna.load_study(study_name="s", storage=storage).trials
    counted = [t for t in after if t.user_attrs.get("launched")
               and t.user_attrs.get("reason") not in ("interrupted", "orphaned")]
    assert len(counted) == 3
    assert not (runs / "s" / ".disk-reserve").exists()


def test_a_full_disk_at_start_creates_nothing(harness, small_disk):
    space = harness.space("disk", {"train.micro_batches": [1, 2]})
    runs = harness.runs = small_disk / "runs"
    _fill(small_disk)
    harness.script(**FAST_TRIAL)
    code, _, err = harness.run(space)
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1 and "is full" in err
    assert not runs.exists()


# -- a database that turns read-only or is deleted ------------------------------------------
@pytest.fixture
def read_only_view(tmp_path):
    """(a directory, a read-only bind mount of it): the same files, writable or not."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a bind mount needs root")
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    bound = subprocess.run(["mount", "--bind", str(rw), str(ro)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], check=True)
        yield rw, ro
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


def test_a_study_on_a_read_only_file_system_stops_each_command_in_one_line_and_loses_nothing(
        harness, read_only_view):
    """The study seen through a read-only mount: sweep and confirm each stop with one
    line, exit 1, no traceback; through the writable one, the same sweep resumes with
    every trial it had."""
    rw, ro = read_only_view
    space = harness.space("ro", {"train.micro_batches": [1, 2, 4]})
    harness.runs = rw / "runs"
    harness.script(**FAST_TRIAL)
    code, _, err = harness.run(space, "sweep.n_trials=2", "sweep.neighbours=true")
    assert code == 0, err
    before = [t.number for t in harness.study().trials if t.user_attrs.get("launched")]
    # The run directory read-only: refused before anything runs, naming the setting.
    code, _, err = harness.main("sweep", *harness.overrides(
        space, "sweep.n_trials=3", f"sweep.runs_dir={ro / 'runs'}"))
    assert code == 2 and "sweep.runs_dir=" in err and "read-only mount" in err, err
    # The database alone read-only (the run directory writable): the first write fails,
    # and each command stops there.
    on_ro = f"sweep.storage=sqlite:///{ro / 'runs' / 's' / 'study.db'}"
    for command in (("sweep", *harness.overrides(space, "sweep.n_trials=3", on_ro)),
                    ("confirm", *harness.overrides(space, "confirm.top_k=1", on_ro))):
        code, _, err = harness.main(*command)
        assert code == 1, (command[0], err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert "is read-only" in err and "run the same command again" in err, err
    harness.runs = rw / "runs"
    assert [t.number for t in harness.study().trials if t.user_attrs.get("launched")] == before
    code, _, err = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true")
    assert code == 0, err
    launched = [t for t in harness.study().trials if t.user_attrs.get("launched")]
    assert len(launched) == 3


def test_a_read_only_or_deleted_database_is_a_stop_not_a_retry(tmp_path):
    import sqlite3

    from autotune.study.faults import Fault, fault_of
    from autotune.study.surviving import Outage, StorageGone, SurvivingStorage

    # SQLite's primary code and an extended one (SQLITE_READONLY_DBMOVED = 8 | 4 << 8);
    # PostgreSQL's read-only transaction (a standby after a failover).
    for code in (sqlite3.SQLITE_READONLY, 8 | (4 << 8)):
        error = sqlite3.OperationalError("attempt to write a readonly database")
        error.sqlite_errorcode = code
        assert fault_of(error) is Fault.READ_ONLY

    class StandbyError(Exception):
        pgcode = "25006"

    assert fault_of(StandbyError()) is Fault.READ_ONLY
    # Rule: a SQLite file deleted under an open storage is said at the next call, before
    # a new connection would start an empty study in its place.
    db = tmp_path / "study.db"
    url = f"sqlite:///{db}"
    storage = SurvivingStorage(url, outage=Outage(url, retry_s=1), engine_kwargs={})
    assert storage.get_all_studies() == []
    db.unlink()
    with pytest.raises(StorageGone, match="was deleted while this command ran"):
        storage.get_all_studies()
    assert not db.exists()


def test_a_database_not_created_yet_is_one_line_naming_createdb(tmp_path, capsys):
    """The first run against a new PostgreSQL server: the database in the URL does not exist
    yet. The line names the command that creates it (the local server; skipped without)."""
    from autotune.cli import main
    from tests.cli.test_cli_errors import assert_one_line_error

    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
    except OSError:
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    # Written as Optuna's docs write it, with no driver: the installed one (psycopg2) is
    # taken (SQLAlchemy 2.1 alone reads it as psycopg 3's: "No module named 'psycopg'").
    url = "postgresql://postgres@127.0.0.1:5432/autotune_never_created"
    code = main(["sweep", f"sweep.storage={url}", f"sweep.runs_dir={tmp_path}",
                 "sweep.n_trials=1"])
    assert_one_line_error(code, capsys.readouterr().err,
                          "createdb -h 127.0.0.1 -p 5432 -U postgres autotune_never_created")
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_database_another_worker_holds_locked_is_not_called_foreign(tmp_path, monkeypatch):
    from autotune.study import storage

    db = tmp_path / "study.db"
    con = sqlite3.connect(db)
    con.executescript("create table studies (id int); create table trials (id int);")
    con.commit()
    monkeypatch.setattr(storage, "LOCK_WAIT_S", 0.05)
    con.execute("begin exclusive")  # a worker of the same study mid-write
    try:
        # Rule: a lock held past the wait is a database in use, not a foreign file (a
        # second worker exited 2 with "is not a SQLite database (database is locked)").
        storage._check_sqlite_file(db)
    finally:
        con.rollback()
        con.close()
    # Rule: a file that is not SQLite is still refused.
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database, only bytes " * 100)
    with pytest.raises(storage.ConfigError, match="is not a SQLite database"):
        storage._check_sqlite_file(junk)
