"""One more run of a configuration already written to a run directory, through the
study's runner (locally, or as a SLURM job in a SLURM study) and the one follow loop.

``confirm``, racing, ``profile`` and the correctness stage re-measure with it. The
run reads a trial's own resolved ``config.yaml``, so a repeat is the same
configuration: with ``run.compile_cache`` it also reuses that configuration's
compiled graphs.
"""

from __future__ import annotations

import shutil

from autotune.running import monitor
from autotune.running.job import Runner, TrialJob
from autotune.settings import SweepSettings
from autotune.study.records import CONDITIONS
from trials.contract.outcomes import Outcome
from trials.contract.trial_dir import TrialDir


def copy_config(source: TrialDir, run_dir: TrialDir) -> TrialDir:
    """``run_dir`` with ``source``'s resolved config in it (a repeat runs its own copy, so
    its directory holds everything it ran)."""
    run_dir.create()
    shutil.copyfile(source.config, run_dir.config)
    return run_dir


def run_once(runner: Runner, run_dir: TrialDir, settings: SweepSettings, *, name: str,
             overrides: tuple[str, ...] = ()) -> monitor.TrialResult:
    """Run the config in ``run_dir`` (plus ``overrides``) once, as the sweep runs a trial,
    and follow it to its end under the sweep's clocks."""
    job = TrialJob.of(run_dir, name, overrides)
    return monitor.run(runner, job, monitor.Clocks.of(settings.stop))


def rerun(runner: Runner, source: TrialDir, run_dir: TrialDir, settings: SweepSettings, *,
          name: str) -> dict | None:
    """Run ``source``'s configuration once more in ``run_dir``; its performance layer (with
    the wall time as ``wall_s`` and the host's conditions, judged against
    ``sweep.contention_cores``, as ``conditions``), or None if it did not finish ok."""
    result = run_once(runner, copy_config(source, run_dir), settings, name=name)
    if result.reason is not Outcome.OK or result.summary is None:
        return None
    return {**measured_performance(result, settings), "wall_s": result.wall_s}


def measured_performance(result: monitor.TrialResult, settings: SweepSettings) -> dict:
    """A finished run's performance layer with the host's conditions over it, judged
    against ``sweep.contention_cores`` (``conditions``: what tells a run under load)."""
    conditions = ({CONDITIONS: result.conditions.judge(settings.contention_cores).to_dict()}
                  if result.conditions is not None else {})
    return {**result.summary.performance, **conditions}
