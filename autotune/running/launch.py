"""One trial of a sweep, launched and followed: its run directory and resolved config
written, what the study keeps of it (its directory, placement and processes, for the
reaper), its heartbeat, and the caller's slow rule and progress wired into the one
follow loop (:func:`autotune.running.monitor.run`)."""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.running import monitor
from autotune.running.devices import Placement
from autotune.running.job import Runner, TrialJob
from autotune.settings import SweepSettings
from autotune.study import reaping
from autotune.study import records as R
from autotune.study.layout import StudyLayout
from trials.contract.events import StepRecord
from trials.contract.schema import TrialConfig


def launch_trial(trial: optuna.Trial, cfg: TrialConfig, *, runner: Runner,
                 layout: StudyLayout, settings: SweepSettings, placement: Placement,
                 slow: Callable[[list[StepRecord]], str | None],
                 tick: Callable[[str], object], note: Callable[[str], None]
                 ) -> monitor.TrialResult:
    """Run trial ``cfg`` in its directory of ``layout`` on ``placement``; ``slow`` judges each
    new step, ``tick`` sees every poll (it raises to take the trial down), ``note`` hears of
    a retry after a lost node."""
    run_dir = layout.trial(trial.number)
    run_dir.write_config(cfg)
    trial.set_user_attr(R.TRIAL_DIR, str(run_dir.path))
    if placement.devices:
        trial.set_user_attr(R.PLACEMENT, placement.text())
    beats = reaping.Heartbeat(trial, settings.heartbeat_interval_s)

    def on_tick(phase: str) -> None:
        tick(phase)
        beats.maybe_beat()

    job = TrialJob(run_dir, cfg, f"{settings.study}/{trial.number}")  # cfg: as written
    return monitor.run(
        runner, job, monitor.Clocks.of(settings.stop), placement=placement,
        hooks=monitor.Hooks(step=slow, tick=on_tick),
        on_start=lambda running: trial.set_user_attr(R.PROCESS, running.record().to_json()),
        on_retry=lambda r: note(f"trial {trial.number}: {r.detail}; starting it once more"))
