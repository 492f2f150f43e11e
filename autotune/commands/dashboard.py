"""``python -m autotune dashboard``: optuna-dashboard on the study, with its artifacts.

    python -m autotune dashboard                               # http://127.0.0.1:8080/dashboard/
    python -m autotune dashboard dashboard.port=9000 dashboard.host=0.0.0.0
    python -m autotune dashboard sweep.study=mine              # any study, as every command

Serves the study's storage and its artifact store (``<runs_dir>/<study>/artifacts``): each
trial's page lists its ``config.yaml``, ``log_tail.txt`` and ``metrics.jsonl`` (stored when
the sweep recorded it) and, for a profiled trial, its ``profile.png``; its note says why it
ended. Before serving, the study's report files (``python -m autotune report``: the
leaderboard CSV, the Markdown, the PNGs) and profile figures are published as artifacts,
each once per content, and the study's note names autotune's pick (Optuna's "Best Trial"
badge reads each trial's first run alone). Prints the URL and runs until Ctrl-C; it never
changes a trial.
"""

from __future__ import annotations

from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import optuna
from omegaconf import DictConfig
from rich.console import Console

from autotune.profiling.profile import stored_profiles
from autotune.settings import DashboardSettings, SweepConfig
from autotune.study import notes
from autotune.study.artifacts import open_store, publish
from autotune.study.choice import study_verdict
from autotune.study.layout import StudyLayout
from autotune.study.records import load_records
from autotune.study.storage import load_existing, open_storage, redact, storage_url
from autotune.study.story import pick_sentence
from trials.contract.schema import ConfigError

STOPPED = "the dashboard stopped; it changes no trial: run the same command to serve it again"
#: The report files published (index.html is left out: its figures are relative links).
REPORT_SUFFIXES = (".csv", ".md", ".png")


class QuietHandler(WSGIRequestHandler):
    """No access log: the dashboard polls the API every few seconds."""

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


class ThreadedServer(ThreadingMixIn, WSGIServer):
    """One thread per request, as optuna-dashboard's own CLI serves it."""

    daemon_threads = True


def listen(options: DashboardSettings, app) -> WSGIServer:
    """A server bound to ``dashboard.host:port``; ConfigError naming the fix when it cannot."""
    try:
        return make_server(options.host, options.port, app, server_class=ThreadedServer,
                           handler_class=QuietHandler)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {options.host}:{options.port} "
                          f"({exc.strerror or exc}): choose another dashboard.port=N (0: any "
                          "free port) or dashboard.host=ADDRESS") from exc


def publish_study_files(study: optuna.Study, layout: StudyLayout, report_dir: Path) -> int:
    """The report's files as study artifacts, each profiled trial's figure as one of the
    trial; how many were uploaded (the rest were there already)."""
    store = open_store(layout.artifacts)
    uploaded = 0
    if report_dir.is_dir():
        for path in sorted(report_dir.iterdir()):
            if path.is_file() and path.suffix in REPORT_SUFFIXES:
                uploaded += publish(study, store, path)
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    for number, profile in sorted(stored_profiles(study).items()):
        figure = Path(profile.figure)
        if number in trials and figure.is_file():
            uploaded += publish(study, store, figure, trial=trials[number])
    return uploaded


def url_of(server: WSGIServer, host: str) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
    return f"http://{shown}:{server.server_port}/dashboard/"


def run_dashboard(composed: DictConfig, console: Console, config: SweepConfig) -> int:
    """Entry point of ``python -m autotune dashboard``; a missing study raises ConfigError."""
    import optuna_dashboard
    from optuna.artifacts import FileSystemArtifactStore

    settings, options = config.sweep, config.dashboard
    study = load_existing(settings)
    layout = StudyLayout.of(settings)
    app = optuna_dashboard.wsgi(open_storage(settings, create=False),
                                artifact_store=FileSystemArtifactStore(layout.artifacts))
    server = listen(options, app)  # before anything is written: a port in use is bad input
    try:
        uploaded = publish_study_files(study, layout,
                                       Path(config.report.out or layout.report))
        records = load_records(study)
        notes.save(study, notes.pick_note(pick_sentence(study_verdict(records, composed),
                                                         records)))
        console.print(f"study {settings.study} in {redact(storage_url(settings))}; artifacts: "
                      f"{layout.artifacts} ({uploaded} report/profile file(s) published)",
                      markup=False, soft_wrap=True)
        console.print(f"dashboard: {url_of(server, options.host)} (Ctrl-C to stop)",
                      markup=False, soft_wrap=True)
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_dashboard(composed, console, config)
