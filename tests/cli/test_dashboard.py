"""optuna-dashboard on a study: each trial's files as its artifacts, why it ended as its note,
``python -m autotune dashboard`` serving both, seen in a real (headless) browser."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import optuna
import pytest
from optuna.artifacts import FileSystemArtifactStore, get_all_artifact_meta
from optuna_dashboard import get_note
from optuna_dashboard.artifact._backend import list_trial_artifacts

from autotune.study.artifacts import publish
from tests import browser
from tests.conftest import ROOT, project_env

FILES = {"config.yaml", "log_tail.txt", "metrics.jsonl"}
#: prefetch -> what the fake trial does (test_sweep_outcomes.py scripts the same knob).
SCRIPT = [{"when": {"data.prefetch": 2}, "do": "crash"},
          {"when": {"data.prefetch": 3}, "do": "oom"}]


def swept(harness, *extra: str):
    """A three-trial fake study: the baseline (ok), then a crash and an OOM."""
    harness.script(SCRIPT)
    space = harness.space("dash", {"data.prefetch": [16, 2, 3]})
    code, _, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=3",
                               "sweep.max_failure_rate=1.0", *extra)
    assert code == 0, err
    return harness.study(), space


def artifacts_of(study, trial) -> dict[str, str]:
    """{file name: artifact id} of a trial's artifacts."""
    return {m.filename: m.artifact_id
            for m in get_all_artifact_meta(trial, storage=study._storage)}


def note_of(study, trial) -> str:
    return get_note(optuna.Trial(study, trial._trial_id))


def test_every_launched_trial_stores_its_files_and_why_it_ended(harness):
    study, _ = swept(harness)
    store = FileSystemArtifactStore(harness.runs / "s" / "artifacts")
    by_reason = {t.user_attrs["reason"]: t for t in study.trials}
    assert set(by_reason) == {"ok", "crash", "oom"}
    for reason, trial in by_reason.items():
        stored = artifacts_of(study, trial)
        # Rule: every launched trial has its config, log tail and metrics as artifacts,
        # failures included, and each artifact is the file its run directory holds.
        assert set(stored) == FILES, (reason, stored)
        run_dir = Path(trial.user_attrs["trial_dir"])
        for name in ("config.yaml", "metrics.jsonl"):
            with store.open_reader(stored[name]) as body:
                assert body.read() == (run_dir / name).read_bytes(), (reason, name)
        # Rule: the note names the outcome and repeats its detail.
        note = note_of(study, trial)
        assert note.startswith(f"## {reason}: ") and trial.user_attrs["detail"] in note
    with store.open_reader(artifacts_of(study, by_reason["crash"])["log_tail.txt"]) as body:
        assert "scripted crash" in body.read().decode()
    # Rule: what a completed trial measured is in its note.
    assert "| tokens/s | 2,000 |" in note_of(study, by_reason["ok"])
    assert "PRUNED" in note_of(study, by_reason["oom"])


def test_a_rejected_trial_gets_a_note_and_no_files(harness):
    harness.script()
    # global_batch 8: micro_batches 3 cannot divide it, so that proposal is never launched.
    space = harness.space("mb", {"train.micro_batches": [4, 3, 2]})
    code, _, err = harness.run(space, "train.micro_batches=4", "sweep.neighbours=true",
                               "sweep.n_trials=2")
    assert code == 0, err
    study = harness.study()
    rejected = next(t for t in study.trials if t.user_attrs["reason"] == "infeasible")
    assert artifacts_of(study, rejected) == {}
    assert "(not launched)" in note_of(study, rejected)


def test_an_upload_that_fails_is_a_warning_and_the_sweep_goes_on(harness, caplog):
    # The store's place is taken by a file: no upload can succeed.
    (harness.runs / "s").mkdir(parents=True)
    (harness.runs / "s" / "artifacts").write_text("not a directory")
    study, _ = swept(harness)
    # Rule: the sweep ran every trial to its outcome all the same...
    assert sorted(t.user_attrs["reason"] for t in study.trials) == ["crash", "ok", "oom"]
    assert all(artifacts_of(study, t) == {} for t in study.trials)
    # ...and said, once per trial, that its files were not stored.
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "autotune.study.artifacts" and r.levelname == "WARNING"]
    assert len(warnings) == 3 and all("no artifact store" in w for w in warnings), warnings


def test_publish_uploads_once_per_content_and_replaces_a_changed_file(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'p.db'}")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    trial = study.trials[0]
    store = FileSystemArtifactStore(tmp_path)
    figure = tmp_path / "profile.png"
    figure.write_bytes(b"first")

    def listed() -> list[dict]:
        return list_trial_artifacts(study._storage.get_study_system_attrs(study._study_id),
                                    study._storage.get_trial_system_attrs(trial._trial_id),
                                    trial)

    # Rule: a finished trial takes the file, listed where optuna-dashboard looks.
    assert publish(study, store, figure, trial=trial)
    (first,) = listed()
    # Rule: the same content again uploads nothing.
    assert not publish(study, store, figure, trial=trial)
    assert [a["artifact_id"] for a in listed()] == [first["artifact_id"]]
    # Rule: new content replaces the old upload, whose file is gone from the store.
    figure.write_bytes(b"second")
    assert publish(study, store, figure, trial=trial)
    (second,) = listed()
    assert second["artifact_id"] != first["artifact_id"]
    assert not (tmp_path / first["artifact_id"]).exists()
    with store.open_reader(second["artifact_id"]) as body:
        assert body.read() == b"second"


class Dashboard:
    """``python -m autotune dashboard`` in a process of its own, on a free port."""

    def __init__(self, overrides: list[str]) -> None:
        env = project_env()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autotune", "dashboard", *overrides, "dashboard.port=0"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        for line in self.proc.stdout:  # the URL line comes once the port is bound
            self.lines.append(line)
            found = re.search(r"dashboard: (http://\S+)/dashboard/", line)
            if found:
                self.base = found.group(1)
                return
        raise AssertionError("".join(self.lines) + self.proc.stderr.read())

    def api(self, path: str):
        with urllib.request.urlopen(self.base + path, timeout=30) as response:
            return json.loads(response.read())

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


needs_browser = pytest.mark.skipif(
    browser.chromium() is None and not os.environ.get("AUTOTUNE_REQUIRE_BROWSER"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)")


@needs_browser
def test_the_dashboard_shows_a_trials_artifacts_in_a_browser(harness):
    study, space = swept(harness)
    crash = next(t for t in study.trials if t.user_attrs["reason"] == "crash")
    # A profiled trial: its figure is published to it when the dashboard starts.
    figure = harness.tmp / "profile.png"
    figure.write_bytes(b"\x89PNG\r\n\x1a\n a figure")
    study.set_user_attr("autotune.profile", {str(crash.number): {"figure": str(figure)}})
    report = harness.runs / "s" / "report"
    report.mkdir()
    (report / "experiments.md").write_text("# Experiments\n")
    dashboard = Dashboard(harness.overrides(space))
    try:
        (summary,) = dashboard.api("/api/studies")["study_summaries"]
        page = browser.dump_dom(f"{dashboard.base}/dashboard/studies/{summary['study_id']}"
                                f"/trials?numbers={crash.number}")
        study_page = browser.dump_dom(f"{dashboard.base}/dashboard/studies/"
                                      f"{summary['study_id']}")
    finally:
        code, err = dashboard.stop()
    stored = artifacts_of(study, crash)
    # Rule: the trial's page, rendered by a browser, lists each stored file with a link
    # to the artifact the sweep uploaded; and its profile figure, published at start.
    for name in FILES:
        link = (rf'download="{re.escape(name)}" href="/artifacts/{summary["study_id"]}/\d+/'
                rf'{stored[name]}"')
        assert re.search(link, page), name
    assert 'download="profile.png"' in page
    # Rule: the page shows the note with the outcome and the log's words.
    assert "crash: " in page and crash.user_attrs["detail"] in page
    # Rule: the report's files are the study's artifacts, on the study's page.
    assert 'download="experiments.md"' in study_page
    # Rule: the study's note names autotune's pick (the sentence every command prints) and
    # why Optuna's own "Best Trial" badge may mark another trial.
    note = get_note(optuna.load_study(study_name=study.study_name, storage=study._storage))
    assert "pick (what export and soak take): trial #0 (the baseline)" in note
    assert "Best Trial" in note
    # Rule: Ctrl-C ends it with one line, as every command that is stopped.
    assert code == 130 and err.strip().splitlines()[-1].startswith("autotune: stopped by SIGINT")


def test_a_missing_study_or_a_taken_port_is_one_line_and_writes_nothing(harness, capsys):
    import socket

    from autotune.cli import main

    code = main(["dashboard", f"sweep.runs_dir={harness.runs}", "sweep.study=none"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no study database" in err[0], err
    assert not harness.runs.exists()
    _, space = swept(harness)
    store = harness.runs / "s" / "artifacts"
    before = sorted(p.name for p in store.iterdir())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["dashboard", *harness.overrides(space), f"dashboard.port={port}"])
    err = capsys.readouterr().err.strip().splitlines()
    # Rule: a port in use is bad input: one line naming the override, nothing written.
    assert code == 2 and len(err) == 1 and "dashboard.port=" in err[0], err
    assert sorted(p.name for p in store.iterdir()) == before
