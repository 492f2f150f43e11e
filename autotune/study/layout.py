"""Where a study's runs live on disk: the one owner of ``<runs_dir>/<study>/``, and of
the SQLite storage URL that names its database (:func:`sqlite_url`, :func:`sqlite_path`:
the one parser of such URLs).

    <study>/study.db                         the SQLite study (the default storage)
    <study>/trial-0003/                      trial 3 (a TrialDir)
    <study>/trial-0003/race-0-trial-0001/    racing: round 0's run of trial 1, beside 3
    <study>/trial-0000/check-2/              the baseline (trial 0) re-measured, the 3rd time
    <study>/confirm/trial-0003-run-1/        confirm: round 1's run of trial 3
    <study>/profile/trial-0003/              profile of trial 3 (or profile/composed/)
    <study>/stages/correctness/baseline/     a tuning stage's run
    <study>/soak/trial-0003/run/ soak.json   soak of trial 3, soak.png beside (SoakFiles;
                                             soak.out moves it; -injected: a fault injection)
    <study>/report/  <study>/export/
    <study>/artifacts/                       the Optuna artifact store (optuna-dashboard's)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from autotune.settings import SweepSettings
from trials.contract.trial_dir import TrialDir, trial_name

#: The scheme prefix of a SQLite URL with a path (``sqlite:////abs/study.db`` is absolute).
SQLITE_PREFIX = "sqlite:///"
DB_NAME = "study.db"


def sqlite_url(path: Path | str) -> str:
    """The storage URL of the SQLite database at ``path``."""
    return f"{SQLITE_PREFIX}{path}"


def sqlite_path(url: str) -> Path | None:
    """The database file a SQLite storage URL names; None for any other storage."""
    return Path(url[len(SQLITE_PREFIX):]) if url.startswith(SQLITE_PREFIX) else None


def study_url(runs_dir: Path | str, study: str) -> str:
    """The default storage of study ``study`` under ``runs_dir`` (what bench scripts and
    tests open a finished sweep by)."""
    return sqlite_url(Path(runs_dir) / study / DB_NAME)


def named_by(name: str, shaped: object) -> str:
    """A directory's name: ``name``, and a digest of what else shaped its contents (JSON of
    ``shaped``) where there is any, so that two outputs that differ get a directory each."""
    if not shaped:
        return name
    digest = hashlib.sha256(json.dumps(shaped, sort_keys=True, default=str).encode())
    return f"{name}-{digest.hexdigest()[:8]}"


@dataclass(frozen=True)
class StudyLayout:
    root: Path

    @classmethod
    def of(cls, settings: SweepSettings) -> StudyLayout:
        return cls(Path(settings.runs_dir).resolve() / settings.study)

    @property
    def db(self) -> Path:
        """The SQLite study, the default storage."""
        return self.root / DB_NAME

    @property
    def storage_url(self) -> str:
        return sqlite_url(self.db)

    def relocated(self, recorded: str | Path) -> Path | None:
        """A run directory the study recorded under another root (the study was copied or
        moved: ``/old/runs/<study>/trial-0003`` -> ``<root>/trial-0003``), where it exists
        under this root; None otherwise."""
        parts = Path(recorded).parts
        if self.root.name not in parts:
            return None
        last = len(parts) - 1 - parts[::-1].index(self.root.name)
        moved = self.root.joinpath(*parts[last + 1:])
        return moved if moved.exists() else None

    def trial(self, number: int) -> TrialDir:
        return TrialDir.for_trial(self.root, number)

    def race(self, trial: int, round_index: int, entrant: int) -> TrialDir:
        """Round ``round_index``'s run of ``entrant``, racing beside ``trial``."""
        return TrialDir(self.trial(trial).path / f"race-{round_index}-{trial_name(entrant)}")

    def final(self, budget: str, round_index: int, entrant: int) -> TrialDir:
        """Round ``round_index``'s run of ``entrant`` in the race that ends the sweep with
        this ``budget`` (a resumed sweep with a larger one races again, beside it)."""
        return TrialDir(self.root / "final" / budget
                        / f"{trial_name(entrant)}-run-{round_index}")

    def baseline_check(self, baseline: int, index: int) -> TrialDir:
        """The ``index``-th re-measurement of the baseline (``sweep.baseline_every``)."""
        return TrialDir(self.trial(baseline).path / f"check-{index}")

    def confirm(self, trial: int, round_index: int) -> TrialDir:
        return TrialDir(self.root / "confirm" / f"{trial_name(trial)}-run-{round_index}")

    def profile(self, trial: int | None, overrides: Sequence[str] = ()) -> Path:
        """Where ``profile`` writes: a trial's, or the composed configuration's (None), one
        directory for each set of trial ``overrides`` (two composed profiles overwrote
        each other)."""
        if trial is not None:
            return self.root / "profile" / trial_name(trial)
        return self.root / "profile" / named_by("composed", sorted(overrides))

    def stage(self, stage: str, name: str) -> TrialDir:
        return TrialDir(self.root / "stages" / stage / name)

    def soak(self, trial: int, *, injected: bool = False) -> Path:
        """Where ``soak`` writes a trial's soak (two trials' soaks in one directory overwrote
        each other); a fault-injection soak apart from the trial's own."""
        return self.root / "soak" / (trial_name(trial) + ("-injected" if injected else ""))

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


@dataclass(frozen=True)
class SoakFiles:
    """What a soak writes in its directory (``<study>/soak``, or ``soak.out``)."""

    #: The names it may find there from an earlier soak.
    NAMES: ClassVar[frozenset[str]] = frozenset({"run", "soak.json", "soak.png"})

    root: Path

    @property
    def run(self) -> Path:
        """The soak's own run directory (its config, checkpoints, metrics)."""
        return self.root / "run"

    @property
    def checkpoints(self) -> Path:
        return self.run / "checkpoints"

    @property
    def metrics(self) -> Path:
        return self.run / "metrics.jsonl"

    @property
    def result(self) -> Path:
        return self.root / "soak.json"

    @property
    def plot(self) -> Path:
        return self.root / "soak.png"
