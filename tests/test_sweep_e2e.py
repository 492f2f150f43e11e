"""End to end: a real sweep of real MindSpore trials (tiny GPT), msrun included."""

from __future__ import annotations

import re
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import ROOT, project_env

#: Every test here runs real MindSpore trials.
pytestmark = pytest.mark.slow


def test_real_sweep_with_data_parallel_trial(harness):
    space = harness.space("real", {"train.micro_batches": [1, 2],
                                   "parallel.split": ["1x1x1", "2x1x1"]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.neighbours=true", "sweep.n_trials=3",
                               "run.warmup_steps=1", "run.measure_steps=4",
                               # No slow-pruning: every trial must finish and be measured.
                               "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0",
                               # Profile the winner however small the sweep.
                               "profile.max_sweep_share=1", "profile.steps=3",
                               fake=False)]
    proc = subprocess.run(argv, cwd=ROOT, env=project_env(), capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = optuna.load_study(study_name="s",
                              storage=f"sqlite:///{harness.runs / 's' / 'study.db'}")
    trials = study.trials
    assert [t.user_attrs["role"] for t in trials] == ["baseline", "neighbour", "neighbour"]
    baseline = trials[0]
    assert baseline.state is TrialState.COMPLETE
    card = baseline.user_attrs["scorecard"]
    assert card["performance"]["tokens_per_s"] == baseline.value > 0
    assert 0 < card["performance"]["mfu"] < 1
    assert card["correctness"]["loss_falling"]
    dp2 = next(t for t in trials if t.params["parallel.split"] == "2x1x1")
    # The dp=2 trial ran through msrun: two ranks, both measured.
    assert dp2.user_attrs["reason"] == "ok", dp2.user_attrs
    assert len(dp2.user_attrs["scorecard"]["resources"]["peak_rss_gib_per_rank"]) == 2
    assert 0 < dp2.user_attrs["scorecard"]["performance"]["comm_share"] < 1
    from pathlib import Path

    assert (Path(dp2.user_attrs["trial_dir"]) / "msrun_log").is_dir()
    # The leaderboard at the end names the study and its knobs.
    assert "tokens/s" in proc.stdout and "split" in proc.stdout and "study: sqlite" in proc.stdout
    # The winner was profiled at the end, and the report shows where its time goes.
    profiles = study.user_attrs["autotune.profile"]
    assert len(profiles) == 1 and "profiling the winner" in proc.stdout
    # Its cost is weighed against the trials' seconds, as the line says (not the sweep's).
    assert re.search(r"the profile took \d+ s \([\d.]+ % of the \d+ s its trials ran\)",
                     proc.stdout), proc.stdout[-1500:]
    (winner, stored), = profiles.items()
    assert stored["profile"]["steps"] == 3 and stored["share_of_sweep"] > 0
    report = subprocess.run([sys.executable, "-m", "autotune", "report",
                             *harness.overrides(space, fake=False)], cwd=ROOT, env=project_env(),
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    index = (harness.runs / "s" / "report" / "index.md").read_text()
    assert "## Where the time goes" in index and f"Trial #{winner}" in index
    assert (harness.runs / "s" / "report" / "where_the_time_goes.png").stat().st_size > 0
    # Every real trial's files are its artifacts; the dashboard's start publishes the
    # winner's profile figure to it and the report's files to the study.
    from optuna.artifacts import get_all_artifact_meta
    from optuna_dashboard.artifact._backend import list_trial_artifacts

    from autotune.commands.dashboard import publish_study_files
    from autotune.study.layout import StudyLayout

    for trial in trials:
        names = {m.filename for m in get_all_artifact_meta(trial, storage=study._storage)}
        assert names == {"config.yaml", "log_tail.txt", "metrics.jsonl"}, (trial.number, names)
    layout = StudyLayout(harness.runs / "s")
    assert publish_study_files(study, layout, layout.report) > 0
    system = study._storage.get_study_system_attrs(study._study_id)
    profiled = next(t for t in study.trials if t.number == int(winner))
    assert "profile.png" in {a["filename"] for a in list_trial_artifacts(
        system, study._storage.get_trial_system_attrs(profiled._trial_id), profiled)}
    assert "index.md" in {m.filename for m in get_all_artifact_meta(study)}


def test_a_real_workload_whose_loss_is_nan_ends_the_sweep_with_exit_1(harness):
    space = harness.space("blowup", {"train.micro_batches": [1, 2]})
    # train.lr=1e30: the first update makes every weight huge, the loss NaN from step 1.
    code, out, _ = harness.run(space, "train.lr=1e30", "sweep.n_trials=2",
                               "run.warmup_steps=1", "run.measure_steps=4", fake=False)
    # Rule: a baseline that diverges at step 1 says the workload is wrong, not a knob: the
    # sweep stops after it with exit 1 instead of spending its budget and exiting 0.
    assert code == 1
    assert "stopped: every trial diverged at step 1: the workload, not a knob" in out
    launched = [t for t in harness.study().trials if t.user_attrs.get("launched")]
    assert [t.user_attrs["reason"] for t in launched] == ["diverged"]
