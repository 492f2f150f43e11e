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
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from trials.contract.hostload import LoadMeter
from trials.contract.launch import trial_argv, trial_env
from trials.contract.performance import Performance

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "runs" / "bench"


def cli(main: Callable[[], int | None]) -> None:
    """Run a bench's ``main`` as its command: what it returns is the exit code. A reader
    that goes away (a bench piped into ``head``) ends it quietly with exit code 1, as
    Python's documentation of SIGPIPE advises, not with a BrokenPipeError's traceback."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null: the interpreter's last flush at exit would raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)


def child_env() -> dict[str, str]:
    """Environment of a trial: the one launch recipe's (trials/contract/launch.py)."""
    return trial_env(os.environ)


# -- other load on this shared machine ------------------------------------------------------
# The measurement (LoadMeter) is trials/contract/hostload.py's, shared with the CPU peak
# calibration, which refuses a figure measured under load.
#: Foreign load (cores) above which the machine counts as busy before a run starts.
QUIET_CORES = 0.3


def wait_for_quiet(max_wait_s: float = 120.0, sample_s: float = 1.0) -> dict[str, float]:
    """Wait (up to max_wait_s) until other processes use under QUIET_CORES; return the wait."""
    start = time.perf_counter()
    announced = False
    while True:
        meter = LoadMeter()
        time.sleep(sample_s)
        load = meter.stop()["foreign_cores"]
        waited = time.perf_counter() - start
        if load < QUIET_CORES or waited >= max_wait_s:
            if announced:
                log(f"machine quiet enough after {waited:.0f} s (foreign load {load:.2f} cores)")
            return {"waited_s": waited, "foreign_cores_before": load}
        if not announced:
            log(f"another job uses {load:.2f} cores; waiting up to {max_wait_s:.0f} s")
            announced = True


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
    #: Cores used by other processes / stolen by the hypervisor during the run.
    load: dict[str, float] = field(default_factory=dict)
    #: Epoch seconds at launch (metrics lines carry epoch times).
    started_at: float = 0.0
    #: The profile event, where run.profile_steps > 0.
    profile: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.outcome == "ok" and bool(self.performance)

    @property
    def performance(self) -> dict[str, Any]:
        return self.summary.get("performance", {})

    @property
    def perf(self) -> Performance:
        return Performance.from_dict(self.performance)

    @property
    def tokens_per_s(self) -> float:
        tps = self.perf.tokens_per_s
        return float("nan") if tps is None else tps

    @property
    def step_time_median_s(self) -> float:
        step = self.perf.step_time_median_s
        return float("nan") if step is None else step

    def check(self) -> "TrialRun":
        if not self.ok:
            raise RuntimeError(f"trial {' '.join(self.overrides)} failed: rc={self.rc} "
                               f"outcome={self.outcome} reason={self.reason}\n{self.stderr_tail}")
        return self


def read_events(path: Path, kind: str) -> list[dict]:
    """Every event of one kind in a metrics.jsonl."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == kind:
            out.append(record)
    return out


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


def run_trial(overrides: Sequence[str], *, timeout_s: float = 300.0, quiet_wait_s: float = 0.0,
              keep_dir_on_failure: bool = True, world_size: int = 1) -> TrialRun:
    """Run ``python -m trials.train <overrides>`` in a fresh temporary working directory.

    With ``quiet_wait_s`` > 0, first wait up to that long for other jobs to go quiet.
    """
    before = wait_for_quiet(quiet_wait_s) if quiet_wait_s > 0 else {}
    workdir = Path(tempfile.mkdtemp(prefix="autotune-bench-"))
    metrics = workdir / "metrics.jsonl"
    cmd = trial_argv(None, world_size=world_size, log_dir=workdir / "msrun_log",
                     overrides=[*overrides, f"run.metrics_path={metrics}"])
    started_at = time.time()
    start = time.perf_counter()
    meter = LoadMeter()
    # A session of its own: on a timeout the whole group goes (msrun's ranks with it; a
    # plain kill of msrun left two ranks of a reference run busy for minutes).
    proc = subprocess.Popen(cmd, cwd=workdir, env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        rc = None
        err = (err or "") + f"\n[bench] timed out after {timeout_s:.0f} s"
    wall = time.perf_counter() - start
    load = meter.stop()
    summary, steps, end = read_metrics(metrics)
    run = TrialRun(overrides=list(overrides), rc=rc, wall_s=wall, outcome=end.get("outcome"),
                   reason=end.get("reason"), summary=summary, steps=steps,
                   stderr_tail=err[-2000:], load={**load, **before}, started_at=started_at,
                   profile=next(iter(read_events(metrics, "profile")), {}))
    if run.ok or not keep_dir_on_failure:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        run.stderr_tail += f"\n[bench] working directory kept: {workdir}"
    return run


def run_module(module: str, args: Sequence[str], *, timeout_s: float = 300.0,
               quiet_wait_s: float = 0.0) -> dict[str, Any]:
    """Run ``python -m <module> <args> --out <file>`` in a fresh directory; return its JSON."""
    before = wait_for_quiet(quiet_wait_s) if quiet_wait_s > 0 else {}
    workdir = Path(tempfile.mkdtemp(prefix="autotune-bench-"))
    out = workdir / "result.json"
    cmd = [sys.executable, "-m", module, *args, "--out", str(out)]
    meter = LoadMeter()
    proc = subprocess.run(cmd, cwd=workdir, env=child_env(), capture_output=True, text=True,
                          timeout=timeout_s)
    load = meter.stop()
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"{' '.join(cmd)} failed (rc={proc.returncode}); working directory "
                           f"kept: {workdir}\n{proc.stderr[-2000:]}")
    result = json.loads(out.read_text())
    result["load"] = {**load, **before}
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
    """Numbers right-aligned, text left-aligned."""
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    right = [[False] * len(headers)] + [[isinstance(c, (int, float)) for c in row]
                                         for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) if r else c.ljust(w)
                        for c, w, r in zip(row, widths, right[n])).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    sys.stdout.flush()


def machine_info() -> dict[str, Any]:
    from trials.contract.machine import cpu_model

    cpu = cpu_model()
    info: dict[str, Any] = {"cpu": cpu, "cpus": os.cpu_count(),
                            "python": platform.python_version()}
    try:
        from importlib.metadata import version

        info["mindspore"] = version("mindspore")
        info["numpy"] = version("numpy")
    except Exception:  # noqa: BLE001 - informational only
        pass
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                            capture_output=True, text=True).stdout.strip()
        # Uncommitted edits of the code under test (the numbers are of the working tree).
        info["uncommitted"] = subprocess.run(
            ["git", "status", "--porcelain", "--", "autotune", "trials", "conf", "bench/*.py"],
            cwd=REPO,
            capture_output=True, text=True).stdout.split("\n")[:-1]
    except OSError:
        pass
    return info


def _running_module(fallback: str) -> str:
    """The module run as ``python -m`` (a result's file name may differ from it:
    cost_model_heldout_vs_<rev>), else bench.<fallback>."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name if spec is not None and spec.name else f"bench.{fallback}"


def write_result(name: str, result: dict[str, Any], *, directory: Path | None = None) -> Path:
    """``<directory>/<name>.json`` (default runs/bench/; bench/results/ for results that are
    committed) with the date, the command and the machine."""
    directory = directory or RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    payload = {"benchmark": name,
               "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
               "command": " ".join([Path(sys.executable).name, "-m", _running_module(name),
                                    *sys.argv[1:]]),
               "machine": machine_info(), **result}
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def add_quiet_argument(parser) -> None:
    parser.add_argument("--max-wait", type=float, default=120.0, metavar="S",
                        help="before each run, wait up to S seconds for other jobs on this "
                             "machine to go quiet (0 = never wait; default 120)")


def load_note(loads: Sequence[dict[str, float]]) -> str:
    """One line on how much other jobs competed during the runs."""
    foreign = [d.get("foreign_cores", 0.0) for d in loads]
    waited = sum(d.get("waited_s", 0.0) for d in loads)
    busy = sum(1 for f in foreign if f > QUIET_CORES)
    return (f"other jobs during the runs: median {median(foreign):.2f}, max {max(foreign):.2f} "
            f"cores; {busy}/{len(foreign)} runs above {QUIET_CORES} cores; waited {waited:.0f} s "
            "for quiet")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
