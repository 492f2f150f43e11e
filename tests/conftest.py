"""Shared fixtures: run the real trial program or the orchestrator as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ["workload=gpt_tiny", "run.warmup_steps=1", "run.measure_steps=3"]


def project_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["GLOG_v"] = "3"
    env["PYTHONWARNINGS"] = "ignore"
    env.setdefault("AUTOTUNE_CACHE", str(ROOT / ".cache" / "test"))
    env.update(extra)
    return env


def read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TrialRun:
    def __init__(self, proc: subprocess.CompletedProcess, cwd: Path) -> None:
        self.returncode = proc.returncode
        self.stdout, self.stderr = proc.stdout, proc.stderr
        self.events = read_events(cwd / "metrics.jsonl")
        self.cwd = cwd

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def end(self) -> dict:
        return self.of("end")[-1]

    @property
    def summary(self) -> dict:
        return self.of("summary")[-1]

    @property
    def losses(self) -> list[float]:
        return [e["loss"] for e in self.of("step")]


@pytest.fixture
def run_trial(tmp_path):
    """Run ``python -m trials.train`` in a fresh directory; returns a TrialRun."""
    counter = iter(range(1000))

    def run(*overrides: str, args: tuple[str, ...] = (), cwd: Path | None = None,
            timeout: float = 240, tiny: bool = True) -> TrialRun:
        workdir = cwd or tmp_path / f"trial-{next(counter)}"
        workdir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "trials.train", *args, *(TINY if tiny else []), *overrides]
        proc = subprocess.run(argv, cwd=workdir, env=project_env(), capture_output=True,
                              text=True, timeout=timeout)
        return TrialRun(proc, workdir)

    return run
