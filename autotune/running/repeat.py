"""One more run of a trial's exact configuration, launched as the sweep launches it.

``confirm`` and racing (autotune/sweep.py) re-measure with it. The run reads the
trial's own resolved ``config.yaml``, so a repeat is the same configuration: with
``run.compile_cache`` it also reuses that configuration's compiled graphs.
"""

from __future__ import annotations

import time
from pathlib import Path

from autotune.running import launcher, monitor
from autotune.settings import SweepSettings
from trials.contract.compose import load_resolved
from trials.contract.launch import trial_argv
from trials.contract.outcomes import Outcome
from trials.contract.schema import to_trial_config


def run_once(config: Path, out_dir: Path, settings: SweepSettings, *, marker: str,
             overrides: tuple[str, ...] = ()) -> monitor.TrialResult:
    """Run the resolved ``config`` (plus ``overrides``) once in ``out_dir``, as the sweep
    launches a trial, and follow it to its end."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = to_trial_config(load_resolved(config, list(overrides)))
    argv = trial_argv(config, world_size=cfg.parallel.devices,
                      trial_command=launcher.trial_command(settings.simulate,
                                                           settings.trial_command),
                      log_dir=out_dir / "msrun_log", overrides=overrides)
    proc = launcher.start(argv, out_dir, marker=f"{marker}/{time.time_ns()}")
    # The config's own metrics path, relative to the run directory (as in the sweep).
    return monitor.watch(proc, out_dir / cfg.run.metrics_path, out_dir, settings.stop)


def rerun(config: Path, out_dir: Path, settings: SweepSettings, *, marker: str) -> dict | None:
    """Run ``config`` once more in ``out_dir``; its performance layer (with the wall time as
    ``wall_s``), or None if it did not finish ok."""
    result = run_once(config, out_dir, settings, marker=marker)
    if result.reason is not Outcome.OK or result.summary is None:
        return None
    return {**result.summary.performance, "wall_s": result.wall_s}
