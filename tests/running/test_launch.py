"""autotune.running.launch: one trial launched in its directory, recorded for the reaper,
followed with the caller's slow rule and progress."""

from __future__ import annotations

import optuna
import pytest
from omegaconf import OmegaConf

from autotune.running.devices import UNPLACED, Placement
from autotune.running.launch import launch_trial
from autotune.settings import SweepSettings
from autotune.study.layout import StudyLayout
from autotune.testing.script import SCRIPT_ENV
from autotune.testing.virtual import VirtualRunner
from trials.contract.compose import compose
from trials.contract.outcomes import Outcome
from trials.contract.schema import to_trial_config


@pytest.fixture
def setting(tmp_path, monkeypatch):
    monkeypatch.setenv(SCRIPT_ENV, '{"steps": 6}')
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    settings = SweepSettings(runs_dir=str(tmp_path))
    cfg = to_trial_config(compose("trial", ["workload=gpt_tiny", "train.micro_batches=2"]))
    return study, study.ask(), cfg, settings, StudyLayout.of(settings)


def test_the_trial_runs_in_its_directory_and_the_study_knows_where(setting):
    study, trial, cfg, settings, layout = setting
    phases, seen = [], []
    result = launch_trial(trial, cfg, runner=VirtualRunner(), layout=layout,
                          settings=settings, placement=Placement(devices=(0, 1)),
                          slow=lambda steps: seen.append(len(steps)), tick=phases.append,
                          note=print)
    run_dir = layout.trial(trial.number)
    # Rule: the resolved config is written to the trial's own directory before it runs.
    assert OmegaConf.load(run_dir.config).train.micro_batches == 2
    # Rule: the study keeps its directory, its placement and its process (for the reaper).
    attrs = study.trials[trial.number].user_attrs
    assert attrs["trial_dir"] == str(run_dir.path) and attrs["placement"]
    assert "process" in attrs
    # Rule: the slow rule sees each new step; tick sees the polls.
    assert result.reason is Outcome.OK and seen == list(range(1, len(seen) + 1)) and seen
    assert phases


def test_a_slow_verdict_stops_the_trial(setting):
    study, trial, cfg, settings, layout = setting
    result = launch_trial(trial, cfg, runner=VirtualRunner(), layout=layout,
                          settings=settings, placement=UNPLACED,
                          slow=lambda steps: "too slow" if len(steps) >= 2 else None,
                          tick=lambda _: None, note=print)
    # Rule: the slow rule's reason ends the trial as slow; an unplaced trial records none.
    assert result.reason is Outcome.SLOW and "too slow" in result.detail
    assert "placement" not in study.trials[trial.number].user_attrs


def test_a_program_that_cannot_be_started_is_a_trial_that_crashed_with_why(tmp_path):
    from autotune.running.launcher import start
    from trials.contract.trial_dir import TrialDir

    program = tmp_path / "not_a_program"
    program.write_text("neither an ELF file nor a #! line\n")
    program.chmod(0o755)
    run_dir = tmp_path / "trial-0000"
    run_dir.mkdir()
    process = start([str(program)], run_dir, "marker")
    # Rule: the exec failure is not an exception out of the sweep: a process that exits as
    # a crash does (127), with the reason in the trial's stderr log.
    assert process.popen.wait(timeout=30) == 127
    assert "cannot start" in TrialDir(run_dir).stderr.read_text()
    assert "Exec format error" in TrialDir(run_dir).stderr.read_text()
