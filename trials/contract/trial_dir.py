"""The run directory of one trial process: the one owner of its layout.

Both sides agree on it: the orchestrator writes the resolved ``config.yaml`` and
starts the trial program there (its working directory); the trial writes
``metrics.jsonl`` (``run.metrics_path``, relative to the directory) and its
output goes to ``stdout.log`` / ``stderr.log``; ``msrun`` writes its own logs to
``msrun_log/``, a SLURM job its submission files to ``slurm/``.

    run = TrialDir.for_trial(study_dir, 3)      # <study_dir>/trial-0003
    run.write_config(cfg)
    cfg = run.read_config()                     # typed, re-validated
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from trials.contract.compose import load_resolved
from trials.contract.schema import TrialConfig, to_trial_config

CONFIG = "config.yaml"
STDOUT = "stdout.log"
STDERR = "stderr.log"
MSRUN_LOG = "msrun_log"
SLURM = "slurm"


def trial_name(number: int) -> str:
    """The directory name of trial ``number`` in its study's directory."""
    return f"trial-{number:04d}"


@dataclass(frozen=True)
class TrialDir:
    """One run directory (a trial, a repeat of it, a profile, a soak, a stage's run)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))  # a path read back from a study

    @classmethod
    def for_trial(cls, study_dir: Path, number: int) -> TrialDir:
        return cls(Path(study_dir) / trial_name(number))

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def stdout(self) -> Path:
        return self.path / STDOUT

    @property
    def stderr(self) -> Path:
        return self.path / STDERR

    @property
    def msrun_log(self) -> Path:
        return self.path / MSRUN_LOG

    @property
    def slurm(self) -> Path:
        return self.path / SLURM

    def metrics(self, cfg: TrialConfig) -> Path:
        """The metrics file the trial writes (``run.metrics_path``, relative to here)."""
        return self.path / cfg.run.metrics_path

    def has_config(self) -> bool:
        return self.config.is_file()

    def create(self) -> TrialDir:
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def clear(self) -> TrialDir:
        """The directory as a new run finds it: only its ``config.yaml``. Everything an
        earlier run left (metrics, logs, msrun's and SLURM's files, a profiler's output)
        goes, so that nothing of it is read or shown as the new run's; run directories
        nested in it (a trial's baseline checks and races) are runs of their own and stay.
        """
        self.create()
        for entry in self.path.iterdir():
            if entry.name == CONFIG:
                continue
            if entry.is_dir() and not entry.is_symlink():
                if not TrialDir(entry).has_config():
                    shutil.rmtree(entry)
            else:
                entry.unlink()
        return self

    def write_config(self, cfg: TrialConfig) -> Path:
        """Write the resolved configuration the trial runs; its path."""
        self.create()
        self.config.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
        return self.config

    def read_config(self, overrides: list[str] | tuple[str, ...] = ()) -> TrialConfig:
        """The configuration the trial ran (plus ``overrides``), typed and re-validated."""
        return to_trial_config(load_resolved(self.config, list(overrides)))

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of its stderr and stdout, for a human reading a failure."""
        chunks = []
        for path in (self.stderr, self.stdout):
            try:
                text = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            if text:
                chunks.append(f"--- {path.name}\n" + "\n".join(text[-lines:]))
        return "\n".join(chunks)[-4000:]


def of_record(trial_dir: str | Path | None) -> TrialDir | None:
    """The run directory a study recorded for a trial (``trial_dir``), or None."""
    return TrialDir(trial_dir) if trial_dir else None
