"""Shared helpers of the benchmarks: run one trial in its own directory, read its summary.

Every trial runs as a fresh ``python -m trials.train`` process (as the
orchestrator runs it) in a private temporary working directory, because
MindSpore writes into the current directory. Results go to
``runs/bench/<name>.json`` (``runs/`` is git-ignored).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "runs" / "bench"


def child_env() -> dict[str, str]:
    """Environment of a trial: quiet MindSpore logs, the repo importable."""
    env = dict(os.environ)
    env["GLOG_v"] = "3"
    env.setdefault("PYTHONWARNINGS", "ignore")
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
    return env


@dataclass
class TrialRun:
    """What one trial process left behind."""

    overrides: list[str]
    rc: int | None
    wall_s: float
    outcome: str | None = None
    reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.outcome == "ok" and bool(self.performance)

    @property
    def performance(self) -> dict[str, Any]:
        return self.summary.get("performance", {})

    @property
    def tokens_per_s(self) -> float:
        return float(self.performance.get("tokens_per_s", float("nan")))

    @property
    def step_time_median_s(self) -> float:
        return float(self.performance.get("step_time_median_s", float("nan")))

    def check(self) -> "TrialRun":
        if not self.ok:
            raise RuntimeError(f"trial {' '.join(self.overrides)} failed: rc={self.rc} "
                               f"outcome={self.outcome} reason={self.reason}\n{self.stderr_tail}")
        return self


def read_metrics(path: Path) -> tuple[dict, list[dict], dict]:
    """(summary, step records, end event) of one metrics.jsonl."""
    summary, steps, end = {}, [], {}
    if not path.exists():
        return summary, steps, end
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        kind = record.get("event")
        if kind == "summary":
            summary = record
        elif kind == "step":
            steps.append(record)
        elif kind == "end":
            end = record
    return summary, steps, end


def run_trial(overrides: Sequence[str], *, timeout_s: float = 300.0,
              keep_dir_on_failure: bool = True) -> TrialRun:
    """Run ``python -m trials.train <overrides>`` in a fresh temporary working directory."""
    workdir = Path(tempfile.mkdtemp(prefix="autotune-bench-"))
    metrics = workdir / "metrics.jsonl"
    cmd = [sys.executable, "-m", "trials.train", *overrides, f"run.metrics_path={metrics}"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=child_env(), capture_output=True,
                              text=True, timeout=timeout_s)
        rc, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        err = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) \
            else (exc.stderr or "")
        err += f"\n[bench] timed out after {timeout_s:.0f} s"
    wall = time.perf_counter() - start
    summary, steps, end = read_metrics(metrics)
    run = TrialRun(overrides=list(overrides), rc=rc, wall_s=wall, outcome=end.get("outcome"),
                   reason=end.get("reason"), summary=summary, steps=steps,
                   stderr_tail=err[-2000:])
    if run.ok or not keep_dir_on_failure:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        run.stderr_tail += f"\n[bench] working directory kept: {workdir}"
    return run


def run_module(module: str, args: Sequence[str], *, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run ``python -m <module> <args> --out <file>`` in a fresh directory; return its JSON."""
    workdir = Path(tempfile.mkdtemp(prefix="autotune-bench-"))
    out = workdir / "result.json"
    cmd = [sys.executable, "-m", module, *args, "--out", str(out)]
    proc = subprocess.run(cmd, cwd=workdir, env=child_env(), capture_output=True, text=True,
                          timeout=timeout_s)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{' '.join(cmd)} failed (rc={proc.returncode}); working directory "
                           f"kept: {workdir}\n{proc.stderr[-2000:]}")
    result = json.loads(out.read_text())
    shutil.rmtree(workdir, ignore_errors=True)
    return result


# -- statistics -----------------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation: sample standard deviation (n - 1) / mean."""
    if len(values) < 2:
        return 0.0
    return float(statistics.stdev(values) / statistics.fmean(values))


# -- reporting ------------------------------------------------------------------------------
def fmt(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) if n else c.ljust(w) for c, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    sys.stdout.flush()


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        from importlib.metadata import version

        info["mindspore"] = version("mindspore")
        info["numpy"] = version("numpy")
    except Exception:  # noqa: BLE001 - informational only
        pass
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return info


def write_result(name: str, result: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name,
               "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
               "command": " ".join([Path(sys.executable).name, "-m", f"bench.{name}",
                                    *sys.argv[1:]]),
               "machine": machine_info(), **result}
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
