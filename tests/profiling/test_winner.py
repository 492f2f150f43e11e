"""autotune.profiling.winner: profile the sweep's winner only when that is cheap against it."""

from __future__ import annotations

import io

import optuna
import pytest
from rich.console import Console

from autotune.presentation.invocation import interpreter
from autotune.profiling.profile import PROFILE_STUDY_KEY
from autotune.profiling.winner import (
    PROFILER_FIXED_S,
    estimated_cost_s,
    profile_winner,
    sweep_time_s,
)
from autotune.settings import ProfileSettings, SweepSettings
from tests.fakes import rec
from trials.contract.compose import compose
from trials.contract.schema import to_trial_config
from trials.contract.trial_dir import TrialDir


def winner(tmp_path, wall_s: float = 20.0):
    run_dir = TrialDir(tmp_path / "trial-0")
    cfg = to_trial_config(compose("trial", ["workload=gpt_tiny"]))
    run_dir.write_config(cfg)
    card = {"performance": {"warmup_steps_used": 3, "measured_steps": 6}}
    return rec(0, tokens_per_s=100.0, step_time_s=1.0, wall_s=wall_s, card=card,
               trial_dir=str(run_dir.path)), cfg


def test_the_estimate_is_launch_overhead_plus_the_profile_runs_steps(tmp_path):
    w, cfg = winner(tmp_path)
    overhead = 20.0 - (1 + 3 + 6) * 1.0  # its wall time less its own steps
    steps = 1 + cfg.run.warmup_steps + cfg.run.measure_steps + 1.5 * 4
    # Rule: overhead + (compile, warm-up and measured floors + 1.5 x profiled steps) x
    # step time + the profiler's fixed cost.
    assert estimated_cost_s(w, cfg, 4) == pytest.approx(overhead + steps + PROFILER_FIXED_S)


def test_sweep_time_counts_only_launched_trials_own_runs():
    records = [rec(0, wall_s=10.0), rec(1, wall_s=5.0, reused_from=0),
               rec(2, wall_s=7.0, launched=False), rec(3, wall_s=None)]
    # Rule: reuses and trials never launched spent no trial time.
    assert sweep_time_s(records) == 10.0


class NoRunner:
    def start(self, *_args, **_kwargs):
        raise AssertionError("nothing may run")


def test_a_profile_over_its_share_of_the_sweep_is_only_suggested(tmp_path):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    w, _ = winner(tmp_path)
    out = io.StringIO()
    console = Console(file=out, width=300)
    settings = SweepSettings(runs_dir=str(tmp_path))
    # Rule: cost over max_sweep_share of the trials' time: not run, the command printed.
    result = profile_winner(study, [w], w, settings, ProfileSettings(), console, NoRunner())
    assert result is None
    assert "not profiling the winner, trial 0" in out.getvalue()
    assert (f"{interpreter()} -m autotune profile profile.trial=0 sweep.runs_dir={tmp_path}"
            in out.getvalue())
    # Rule: the command printed finds this study, not the default one (a PostgreSQL
    # study's hint profiled trial 0 of the default SQLite study), its password hidden.
    from autotune.study.storage import same_study

    shared = SweepSettings(study="mine", storage="postgresql+psycopg2://u:secret@db:5432/x")
    assert same_study(shared) == ("sweep.study=mine "
                                  "sweep.storage=postgresql+psycopg2://u:***@db:5432/x")
    assert same_study(SweepSettings()) == ""
    # Rule: a winner already profiled (an earlier run of this sweep) is not profiled again,
    # however cheap (NoRunner would raise), nor is anything said; nor when after_sweep is
    # off, nor without a winner.
    long_sweep = [w, rec(9, wall_s=1e6)]
    study.set_user_attr(PROFILE_STUDY_KEY, {"0": {}})
    quiet = io.StringIO()
    console = Console(file=quiet, width=300)
    assert profile_winner(study, long_sweep, w, settings, ProfileSettings(), console,
                          NoRunner()) is None
    assert profile_winner(study, long_sweep, w, settings, ProfileSettings(after_sweep=False),
                          console, NoRunner()) is None
    assert profile_winner(study, long_sweep, None, settings, ProfileSettings(), console,
                          NoRunner()) is None
    assert quiet.getvalue() == ""


def test_the_hint_for_a_workload_of_your_own_carries_the_sweeps_pythonpath(tmp_path,
                                                                           monkeypatch):
    import dataclasses

    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    w, cfg = winner(tmp_path)
    cfg.workload = dataclasses.replace(cfg.workload, entry="user_workload:make_workload")
    w.run_dir.write_config(cfg)
    monkeypatch.setenv("PYTHONPATH", "tests")
    out = io.StringIO()
    profile_winner(study, [w], w, SweepSettings(runs_dir=str(tmp_path)), ProfileSettings(),
                   Console(file=out, width=300), NoRunner())
    # Rule: run as printed, the command imports the user's workload as the sweep did (it
    # failed "cannot be imported" in a shell without the PYTHONPATH).
    assert (f"run PYTHONPATH=tests {interpreter()} -m autotune profile profile.trial=0"
            in out.getvalue())
