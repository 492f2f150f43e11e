"""A study written before the typed schema (tests/fixtures/study_v1, by main at d364c79)
still loads: its records, confirm's verdict, ``report`` and ``export`` read it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest

from autotune.cli import main
from autotune.study.layout import StudyLayout, study_url
from autotune.study.records import load_records
from autotune.study.schema import Blob, ConfirmVerdict, Repeat, Scorecard, keys
from autotune.study.schema.blob import VERSION_KEY
from autotune.study.schema.confirm import confirm_orders, confirm_verdicts, last_confirm_run
from autotune.study.schema.repeats import (
    BASELINE_CHECK_SOURCE,
    CONFIRM_SOURCE,
    stored_repeats,
)
from autotune.testing.fake_trial import COMMAND as FAKE_TRIAL
from autotune.testing.virtual import virtual_runner
from tests.conftest import ROOT, project_env

FIXTURE = ROOT / "tests" / "fixtures" / "study_v1"


@pytest.fixture
def old_study(tmp_path, monkeypatch):
    """A copy of the fixture (its runs recorded under /tmp/fx/runs/fixture) and the
    overrides that name it."""
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE / "fixture", runs / "fixture")
    conf = tmp_path / "conf" / "search"
    conf.mkdir(parents=True)
    shutil.copyfile(FIXTURE / "search_fixture.yaml", conf / "fixture.yaml")
    monkeypatch.setenv("AUTOTUNE_CACHE", project_env()["AUTOTUNE_CACHE"])
    overrides = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "search=fixture",
                 "workload=gpt_tiny", f"sweep.runs_dir={runs}", "sweep.study=fixture",
                 "sweep.progress=false", "runtime.threads=2",
                 f"sweep.trial_command=[{','.join(FAKE_TRIAL)}]"]
    study = optuna.load_study(study_name="fixture", storage=study_url(runs, "fixture"))
    return study, runs, overrides


def test_the_old_blobs_read_as_the_schema_s_dataclasses(old_study):
    study, runs, _ = old_study
    verdicts = confirm_verdicts(study)
    # Rule: confirm's verdicts (written without a version) read typed: the baseline and the
    # top two, each with 3 rounds; the finalists carry their paired test against trial 0.
    assert sorted(verdicts) == [0, 3, 5]
    assert all(len(v.tokens_per_s) == 3 and v.min <= v.median <= v.max
               for v in verdicts.values())
    assert verdicts[0].vs_baseline is None
    assert verdicts[5].vs_baseline.rounds == 3 and verdicts[5].vs_baseline.ratio < -0.4
    assert verdicts[5].vs_baseline.real and verdicts[5].baseline == 0
    assert verdicts[3].vs_baseline is not None and not verdicts[3].vs_baseline.real
    run = last_confirm_run(study)
    assert run is not None and run.finished and run.plan.trials == [0, 3, 5]
    assert len(confirm_orders(study)) == 3
    repeats = stored_repeats(study)
    # The baseline: one sweep re-measurement (baseline_every=2) and its 3 confirm rounds.
    sources = [r.source for r in repeats[0]]
    assert sources.count(CONFIRM_SOURCE) == 3 and BASELINE_CHECK_SOURCE in sources
    assert all(r.performance.tokens_per_s and r.at for r in repeats[0])
    # Rule: an old blob round-trips: what to_json writes reads back the same.
    for blob in (verdicts[5], repeats[0][-1]):
        assert type(blob).from_json(blob.to_json()) == blob
    card = Scorecard.from_json(study.trials[0].user_attrs[keys.SCORECARD])
    assert card.resources.memory_budget_gib == 8.0 and card.correctness.loss_falling


def test_records_read_the_old_study_typed(old_study):
    study, runs, _ = old_study
    records = load_records(study, layout=StudyLayout(runs / "fixture"))
    by_number = {r.number: r for r in records}
    base = by_number[0]
    # Rule: the trial's typed fields come from the old attributes.
    assert base.role == "baseline" and base.tokens_per_s == 2000.0
    assert base.peak_memory_gib == 2.0 and base.prediction.peak_gib > 0
    assert base.confirmed_tokens_per_s == 2000.0 and len(base.confirm_runs()) == 3
    assert base.n_runs == 2  # its own run and the sweep's re-measurement
    assert by_number[1].reason.value == "oom"
    # Rule: run directories recorded under /tmp/fx/runs are found in the copy.
    assert Path(base.trial_dir).is_relative_to(runs) and base.config() is not None


def test_unknown_fields_are_ignored_and_missing_ones_default():
    # Rule: a newer writer's extra field does not stop an older reader, and a field an
    # older writer never wrote takes its default.
    verdict = ConfirmVerdict.from_json({"median": 5.0, "from_the_future": 1})
    assert verdict.median == 5.0 and verdict.tokens_per_s == [] and verdict.vs_baseline is None
    assert Repeat.from_json({"tokens_per_s": 9.0}).source == ""


def test_report_and_export_run_on_the_old_study(old_study, tmp_path, capsys):
    _, runs, overrides = old_study
    assert main(["report", *overrides]) == 0, capsys.readouterr()
    index = (runs / "fixture" / "report" / "index.md").read_text()
    # Rule: the report names confirm's figures from the old verdict.
    assert "trial #0 (the baseline): median " in index
    out = tmp_path / "export"
    assert main(["export", *overrides, f"export.out={out}"]) == 0, capsys.readouterr()
    provenance = json.loads((out / "provenance.json").read_text())
    # Rule: export takes the pick confirm's verdict supports: the baseline (trial 3 is
    # within noise of it, trial 5 is slower).
    assert provenance["trial"] == 0 and provenance["study"] == "fixture"


def test_confirm_runs_again_on_the_old_study(old_study, monkeypatch, capsys):
    study, _, overrides = old_study
    monkeypatch.setenv("AUTOTUNE_FAKE", json.dumps({"rules": [], "steps": 6,
                                                    "step_sleep": 0.005}))
    before = {n: len(rs) for n, rs in stored_repeats(study).items()}
    with virtual_runner():  # the scripted trials in virtual time
        assert main(["confirm", *overrides, "confirm.top_k=2", "confirm.repeats=2"]) == 0
    out = capsys.readouterr().out
    # Rule: the old confirm finished, so this one measures anew (2 more rounds each),
    # beside the old runs, and stores its verdicts in the current format.
    assert "resuming" not in out and "trial #0 (the baseline): median " in out
    after = stored_repeats(study)
    assert all(len(after[n]) == before[n] + 2 for n in (0, 3, 5))
    stored = study.user_attrs[keys.CONFIRM_VERDICTS]
    assert all(Blob.version_of(v) == ConfirmVerdict.VERSION and VERSION_KEY in v
               for v in stored.values())
    assert len(confirm_verdicts(study)[5].tokens_per_s) == 2
