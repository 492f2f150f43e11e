"""The sweep's last act: profile the winner, when that is cheap against the sweep.

A profile re-runs the winner's configuration with ``profile.steps`` profiled steps
after its measurement: about one trial's wall time plus the profiled steps. It runs
by default when that estimate is under ``profile.max_sweep_share`` (10 %) of the
time the study's launched trials took; otherwise the sweep says how to run it.
"""

from __future__ import annotations

import os
import shlex

import optuna
from rich.console import Console

from autotune.presentation.invocation import autotune_command
from autotune.profiling.profile import profile_config, store, stored_profiles, write_result
from autotune.running.job import Runner
from autotune.settings import ProfileSettings, SweepSettings
from autotune.study.layout import StudyLayout
from autotune.study.records import TrialRecord
from autotune.study.schema.profile import ProfileResult
from autotune.study.storage import same_study
from trials.contract.schema import TrialConfig

#: Seconds the profiler adds on top of the profiled steps: start-up and parsing (measured
#: about 1-3 s on this CPU, BENCHMARKS.md "profiler overhead").
PROFILER_FIXED_S = 3.0


def estimated_cost_s(winner: TrialRecord, cfg: TrialConfig, steps: int) -> float:
    """The winner's launch overhead (its wall time less its steps), then the profile run's
    steps: compile, the warm-up and measuring floors, and the profiled steps at 1.5x
    (the profiler's overhead, BENCHMARKS.md), plus the profiler's fixed cost."""
    step_s = winner.step_time_s or 0.0
    perf = winner.perf
    own = 1 + (perf.warmup_steps_used or 0) + (perf.measured_steps or 0)
    overhead = max(0.0, (winner.wall_s or 0.0) - own * step_s)
    fixed = 1 + cfg.run.warmup_steps + cfg.run.measure_steps
    return overhead + (fixed + 1.5 * steps) * step_s + PROFILER_FIXED_S


def sweep_time_s(records: list[TrialRecord]) -> float:
    """Wall time of every launched trial of the study (its own runs, not reuses), added up:
    trial-seconds, not the sweep's wall time (trials side by side overlap; the sweep's
    waits and baseline re-measurements are not trials)."""
    return sum(r.wall_s or 0.0 for r in records if r.launched and r.reused_from is None)


def profile_winner(study: optuna.Study, records: list[TrialRecord], winner: TrialRecord | None,
                   settings: SweepSettings, options: ProfileSettings,
                   console: Console, runner: Runner) -> ProfileResult | None:
    if winner is None or not options.after_sweep:
        return None
    run_dir = winner.run_dir
    if run_dir is None or not run_dir.has_config():  # no resolved config: nothing to re-run
        return None
    if winner.number in stored_profiles(study):
        return None  # profiled by an earlier run of this sweep
    cfg = run_dir.read_config()
    cost, spent = estimated_cost_s(winner, cfg, options.steps), sweep_time_s(records)
    # A workload of the user's own imports only where the sweep's PYTHONPATH reaches it:
    # the printed command carries it (run as printed, it failed to import).
    path = os.environ.get("PYTHONPATH", "") if cfg.workload.entry else ""
    how = " ".join(p for p in (f"PYTHONPATH={shlex.quote(path)}" if path else "",
                               autotune_command("profile", f"profile.trial={winner.number}",
                                                same_study(settings))) if p)
    if spent <= 0 or cost > options.max_sweep_share * spent:
        console.print(f"not profiling the winner, trial {winner.number}: about {cost:.0f} s, "
                      f"over {100 * options.max_sweep_share:.0f} % of the {spent:.0f} s its "
                      f"trials ran; run {how}", markup=False, soft_wrap=True)
        return None
    console.print(f"profiling the winner, trial {winner.number} (about {cost:.0f} s, "
                  f"{100 * cost / spent:.0f} % of the {spent:.0f} s its trials ran)", markup=False,
                  soft_wrap=True)
    out = StudyLayout.of(settings).profile(winner.number)
    result = profile_config(runner, cfg, out, settings, options.steps, trial=winner.number)
    if result is None:
        console.print(f"profiling trial {winner.number} failed; see {out}", markup=False)
        return None
    result.sweep_s = spent
    result.share_of_sweep = (result.wall_s or 0.0) / spent
    write_result(result)
    store(study, winner.number, result)
    shares = result.profile.shares
    parts = ", ".join(f"{k} {100 * v:.0f} %" for k, v in shares.items() if v >= 0.005)
    console.print(f"where trial {winner.number}'s step goes: {parts}; "
                  f"{len(result.findings)} finding(s); the profile took "
                  f"{result.wall_s or 0:.0f} s ({100 * result.share_of_sweep:.1f} % of the "
                  f"{spent:.0f} s its trials ran); {out / 'profile.png'}", markup=False,
                  soft_wrap=True)
    return result
