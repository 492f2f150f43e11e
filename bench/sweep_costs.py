"""Orchestrator overhead, and trial time saved by stopping bad trials early.

    .venv/bin/python -m bench.sweep_costs                 # default sweep, 12 launches
    .venv/bin/python -m bench.sweep_costs --n-trials 6    # shorter

(a) Overhead: the default sweep (``python -m autotune sweep``) is timed end to end;
    overhead = (sweep wall time - sum of trial process wall times) / sweep wall time.
(b) Stopping: the exact proposals of run (a) are replayed in a second study with the
    stop rules and the trial guards switched off (slow ratio 0, no spike/non-finite
    limit, a huge memory budget), so every trial runs to completion. Reported: total
    trial time both ways, the saving, and the best configuration each way.

Results: runs/bench/sweep_costs.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import optuna

from bench._common import REPO, RESULTS_DIR, child_env

NO_STOPPING = ["sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0",
               "guard.spike_factor=1e30",
               "guard.nonfinite_patience=1000000", "guard.memory_budget_gib=1000",
               "sweep.max_failure_rate=1.0"]


def sweep(runs: Path, study: str, n_trials: int, extra: list[str]) -> float:
    argv = [sys.executable, "-m", "autotune", "sweep", f"sweep.runs_dir={runs}",
            f"sweep.study={study}", f"sweep.n_trials={n_trials}", "sweep.progress=false", *extra]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=child_env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                         f"\n{proc.stderr[-2000:]}")
    return wall


def load(runs: Path, study: str) -> optuna.Study:
    return optuna.load_study(study_name=study, storage=f"sqlite:///{runs / study / 'study.db'}")


def launched(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.user_attrs.get("launched")]


def best(study: optuna.Study) -> tuple[dict, float | None]:
    done = [t for t in study.trials if t.value is not None and t.state.name == "COMPLETE"]
    if not done:
        return {}, None
    top = max(done, key=lambda t: t.value)
    return top.params, top.value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-trials", type=int, default=12)
    parser.add_argument("--runs", type=Path, default=RESULTS_DIR / "sweep_costs")
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with_stop, no_stop = f"stop-{stamp}", f"nostop-{stamp}"

    wall = sweep(args.runs, with_stop, args.n_trials, [])
    a = load(args.runs, with_stop)
    trial_wall = sum(t.user_attrs.get("wall_s", 0.0) for t in launched(a))
    overhead = (wall - trial_wall) / wall

    # Replay the same proposals, in order, with every stop switched off.
    storage = f"sqlite:///{args.runs / no_stop / 'study.db'}"
    (args.runs / no_stop).mkdir(parents=True, exist_ok=True)
    b = optuna.create_study(study_name=no_stop, storage=storage, direction="maximize")
    for t in launched(a):
        b.enqueue_trial(t.params, user_attrs={"role": t.user_attrs.get("role", "sampled")})
    sweep(args.runs, no_stop, len(launched(a)), NO_STOPPING + ["sweep.allow_changed_space=true"])
    b = load(args.runs, no_stop)
    full_wall = sum(t.user_attrs.get("wall_s", 0.0) for t in launched(b))
    reasons_a = [t.user_attrs.get("reason") for t in launched(a)]
    result = {
        "date": time.strftime("%Y-%m-%d"), "n_trials": args.n_trials,
        "sweep_wall_s": wall, "sum_trial_wall_s": trial_wall, "overhead": overhead,
        "reasons_with_stopping": reasons_a,
        "reasons_without_stopping": [t.user_attrs.get("reason") for t in launched(b)],
        "trial_time_with_stopping_s": trial_wall, "trial_time_without_stopping_s": full_wall,
        "saved_fraction": 1 - trial_wall / full_wall if full_wall else None,
        "best_with_stopping": best(a), "best_without_stopping": best(b),
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "sweep_costs.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"(a) sweep wall {wall:.1f} s, trial processes {trial_wall:.1f} s, "
          f"overhead {100 * overhead:.2f} % (target < 2 %)")
    print(f"(b) trial time with stopping {trial_wall:.1f} s vs run to completion "
          f"{full_wall:.1f} s: saved {100 * result['saved_fraction']:.1f} %")
    print(f"    stop reasons: {reasons_a}")
    print(f"    best with stopping:    {result['best_with_stopping']}")
    print(f"    best without stopping: {result['best_without_stopping']}")


if __name__ == "__main__":
    main()
