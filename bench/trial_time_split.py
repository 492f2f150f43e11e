"""Where a trial's wall time goes, in the default sweep: measured steps against the rest.

Runs the default sweep (``python -m autotune sweep``, 12 launches) twice in one go, as
configured (adaptive measurement, compile cache) and with ``run.adaptive=false
run.compile_cache=false`` (4 warm-up + 8 measured steps, the earlier behaviour), and
splits every launched trial's wall time from its metrics file:

- start: launch to the start event (imports, msrun, building the model and dataset);
- compile: the first step; warm-up; measured: the steps throughput rests on;
- end: the last step to the end of the process as the orchestrator saw it.

The headline is measured seconds / trial wall seconds, summed over the sweep.

    .venv/bin/python -m bench.trial_time_split
    .venv/bin/python -m bench.trial_time_split --n-trials 6 --only configured
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autotune.study.layout import study_url
from bench._common import REPO, child_env, cli, log, median, print_table, write_result

NAME = "trial_time_split"
VARIANTS = {"configured": [], "fixed 4+8, no cache": ["run.adaptive=false",
                                                      "run.compile_cache=false"]}
PARTS = ("start", "compile", "warmup", "measured", "end")


def split_trial(trial) -> dict | None:
    """Seconds per part of one launched trial (None when it left no metrics)."""
    from autotune.study import records as R

    a = trial.user_attrs
    if not a.get(R.LAUNCHED) or not a.get(R.TRIAL_DIR) or not a.get(R.WALL_S):
        return None
    path = Path(a[R.TRIAL_DIR]) / "metrics.jsonl"
    if not path.exists():
        return None
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    start = next((e for e in lines if e["event"] == "start"), None)
    steps = [e for e in lines if e["event"] == "step"]
    if start is None or not steps:
        return None
    launched = trial.datetime_start.timestamp()
    wall = float(a[R.WALL_S])
    parts = {
        "start": start["time"] - launched,
        "compile": steps[0]["step_s"],
        "warmup": sum(s["step_s"] for s in steps if s["phase"] == "warmup"),
        "measured": sum(s["step_s"] for s in steps if s["phase"] == "measure"),
    }
    parts["end"] = max(0.0, launched + wall - steps[-1]["time"])
    return {"wall": wall, "outcome": a.get(R.REASON), "steps": len(steps), **parts}


def run_variant(runs: Path, study: str, n_trials: int, extra: list[str]) -> list[dict]:
    import optuna

    argv = [sys.executable, "-m", "autotune", "sweep", f"sweep.runs_dir={runs}",
            f"sweep.study={study}", f"sweep.n_trials={n_trials}", "sweep.progress=false",
            *extra]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=child_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    log(f"{study}: sweep took {time.perf_counter() - started:.0f} s")
    s = optuna.load_study(study_name=study, storage=study_url(runs, study))
    return [t for t in (split_trial(t) for t in s.get_trials(deepcopy=False)) if t]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, default=12)
    parser.add_argument("--only", choices=list(VARIANTS), default=None)
    args = parser.parse_args(argv)
    runs = Path(tempfile.mkdtemp(prefix="autotune-time-split-"))
    results, rows = {}, []
    for i, (name, extra) in enumerate(VARIANTS.items()):
        if args.only and name != args.only:
            continue
        trials = run_variant(runs, f"split-{i}", args.n_trials, extra)
        wall = sum(t["wall"] for t in trials)
        shares = {p: sum(t[p] for t in trials) / wall for p in PARTS}
        results[name] = {"trials": trials, "shares": shares, "wall_s": wall}
        rows.append([name, len(trials), wall, *(100 * shares[p] for p in PARTS),
                     median([t["steps"] for t in trials])])
    headers = ["variant", "trials", "trial wall s", *(f"{p} %" for p in PARTS),
               "median steps"]
    print_table(headers, rows)
    path = write_result(NAME, {"n_trials": args.n_trials, "headers": headers, "rows": rows,
                               "results": results})
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    cli(main)
