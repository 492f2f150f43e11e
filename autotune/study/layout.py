"""Where a study's runs live on disk: the one owner of ``<runs_dir>/<study>/``.

    <study>/study.db                         the SQLite study (the default storage)
    <study>/trial-0003/                      trial 3 (a TrialDir)
    <study>/trial-0003/race-0-trial-0001/    racing: round 0's run of trial 1, beside 3
    <study>/trial-0000/check-2/              the baseline (trial 0) re-measured, the 3rd time
    <study>/confirm/trial-0003-run-1/        confirm: round 1's run of trial 3
    <study>/profile/trial-0003/              profile of trial 3 (or profile/composed/)
    <study>/stages/correctness/baseline/     a tuning stage's run
    <study>/soak/  <study>/report/  <study>/export/
    <study>/artifacts/                       the Optuna artifact store (optuna-dashboard's)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.settings import SweepSettings
from trials.contract.trial_dir import TrialDir, trial_name


@dataclass(frozen=True)
class StudyLayout:
    root: Path

    @classmethod
    def of(cls, settings: SweepSettings) -> StudyLayout:
        return cls(Path(settings.runs_dir).resolve() / settings.study)

    def trial(self, number: int) -> TrialDir:
        return TrialDir.for_trial(self.root, number)

    def race(self, trial: int, round_index: int, entrant: int) -> TrialDir:
        """Round ``round_index``'s run of ``entrant``, racing beside ``trial``."""
        return TrialDir(self.trial(trial).path / f"race-{round_index}-{trial_name(entrant)}")

    def baseline_check(self, baseline: int, index: int) -> TrialDir:
        """The ``index``-th re-measurement of the baseline (``sweep.baseline_every``)."""
        return TrialDir(self.trial(baseline).path / f"check-{index}")

    def confirm(self, trial: int, round_index: int) -> TrialDir:
        return TrialDir(self.root / "confirm" / f"{trial_name(trial)}-run-{round_index}")

    def profile(self, trial: int | None) -> Path:
        """Where ``profile`` writes: a trial's, or the composed configuration's (None)."""
        return self.root / "profile" / ("composed" if trial is None else trial_name(trial))

    def stage(self, stage: str, name: str) -> TrialDir:
        return TrialDir(self.root / "stages" / stage / name)

    @property
    def soak(self) -> Path:
        return self.root / "soak"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def export(self) -> Path:
        return self.root / "export"

    @property
    def artifacts(self) -> Path:
        """The study's Optuna artifact store (autotune/study/artifacts.py)."""
        return self.root / "artifacts"
