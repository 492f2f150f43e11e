"""autotune.running.repeat: one more run of a configuration already in a run directory."""

from __future__ import annotations

import json

import pytest

from autotune.running.repeat import copy_config, rerun
from autotune.settings import SweepSettings
from autotune.testing.script import SCRIPT_ENV
from autotune.testing.virtual import VirtualRunner
from trials.contract.compose import compose
from trials.contract.schema import to_trial_config
from trials.contract.trial_dir import TrialDir


@pytest.fixture
def source(tmp_path) -> TrialDir:
    run_dir = TrialDir(tmp_path / "trial-0")
    run_dir.write_config(to_trial_config(compose("trial", ["workload=gpt_tiny"])))
    return run_dir


def test_a_repeat_runs_its_own_copy_of_the_config(source, tmp_path):
    copy = copy_config(source, TrialDir(tmp_path / "repeat"))
    # Rule: the repeat's directory holds the very config it ran, byte for byte.
    assert copy.config.read_bytes() == source.config.read_bytes()


def test_rerun_returns_the_performance_with_wall_time_and_conditions(source, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv(SCRIPT_ENV, "{}")
    runner = VirtualRunner()
    perf = rerun(runner, source, TrialDir(tmp_path / "again"), SweepSettings(), name="s/r")
    # Rule: one run, through the study's runner, named as asked.
    assert runner.started == ["s/r"]
    # Rule: its performance layer, plus wall_s and the host's conditions judged against
    # sweep.contention_cores.
    assert perf["tokens_per_s"] > 0 and perf["wall_s"] > 0
    assert perf["conditions"]["contention_cores"] == SweepSettings().contention_cores


def test_a_rerun_that_does_not_finish_ok_gives_none(source, tmp_path, monkeypatch):
    script = {"rules": [{"when": {"workload.name": "gpt_tiny"}, "do": "crash"}]}
    monkeypatch.setenv(SCRIPT_ENV, json.dumps(script))
    # Rule: a crashed repeat measured nothing: None, never a partial figure.
    assert rerun(VirtualRunner(), source, TrialDir(tmp_path / "again"), SweepSettings(),
                 name="s/r") is None
