"""Orchestrator overhead, and trial time saved by stopping bad trials early.

    .venv/bin/python -m bench.sweep_costs                 # default sweep, 12 launches
    .venv/bin/python -m bench.sweep_costs --n-trials 6    # shorter

(a) Overhead: the default sweep (``python -m autotune sweep``) is timed end to end;
    overhead = (sweep wall time - sum of trial process wall times) / sweep wall time.
(b) Stopping: the exact proposals of run (a) are replayed in a second study with the
    stop rules and the trial guards switched off (slow ratio 0, no spike/non-finite
    limit, a huge memory budget), so every trial runs to completion. Reported: total
    trial time both ways, the saving, and the best configuration each way.

Results: runs/bench/sweep_costs.json. ``sweep``, ``overhead`` and ``orchestration_phases``
are also what bench/seam_overhead.py measures two checkouts with.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna

from autotune.study import records as R
from autotune.study.layout import study_url
from bench._common import REPO, RESULTS_DIR, child_env, cli

NO_STOPPING = ["sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0",
               "guard.spike_factor=1e30",
               "guard.nonfinite_patience=1000000", "guard.memory_budget_gib=1000",
               "sweep.max_failure_rate=1.0"]


def sweep(runs: Path, study: str, n_trials: int, extra: list[str], *, cwd: Path = REPO,
          env: dict[str, str] | None = None) -> float:
    """Wall time of ``python -m autotune sweep`` run in ``cwd`` (whose autotune/ it imports)."""
    argv = [sys.executable, "-m", "autotune", "sweep", f"sweep.runs_dir={runs}",
            f"sweep.study={study}", f"sweep.n_trials={n_trials}", "sweep.progress=false", *extra]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=child_env() if env is None else env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                         f"\n{proc.stderr[-2000:]}")
    return wall


def load(runs: Path, study: str) -> optuna.Study:
    return optuna.load_study(study_name=study, storage=study_url(runs, study))


def launched(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.user_attrs.get(R.LAUNCHED)]


def overhead(study: optuna.Study, wall: float) -> dict[str, float]:
    """(a): overhead = (sweep wall time - sum of the launched trials' process wall times)
    / sweep wall time."""
    trials = launched(study)
    trial_wall = sum(t.user_attrs.get(R.WALL_S, 0.0) for t in trials)
    return {"sweep_wall_s": wall, "sum_trial_wall_s": trial_wall,
            "orchestrator_s": wall - trial_wall, "overhead": (wall - trial_wall) / wall,
            "launches": len(trials)}


def orchestration_phases(trials: Sequence[Any], wall: float, finished_at: float
                         ) -> dict[str, float]:
    """Where a one-at-a-time sweep's orchestrator time goes, by Optuna's own timestamps.

    ``trials`` are the study's (FrozenTrial-like: ``datetime_start``/``datetime_complete``,
    ``user_attrs``); ``finished_at`` is the epoch second the sweep process exited after
    ``wall`` seconds. The phases: ``startup_s`` (process start to the first ask: imports,
    composition, the study), per launch ``in_slot_s`` (its ask-to-tell time less its
    process wall time: checks, prediction, config, Popen, the monitor's last read, tell),
    ``between_s`` (a tell to the next ask: refits, progress), ``not_launched_s`` (reused
    and rejected proposals, ask to tell) and ``tail_s`` (the last tell to exit: the
    leaderboard). They add up to the orchestrator time; ``unaccounted_s`` is what is left
    (about 0 when the trials ran one at a time).
    """
    started_at = finished_at - wall
    spans = sorted((t.datetime_start.timestamp(), t.datetime_complete.timestamp(), t)
                   for t in trials if t.datetime_start and t.datetime_complete)
    if not spans:
        return {"startup_s": wall, "tail_s": 0.0, "in_slot_s": 0.0, "between_s": 0.0,
                "not_launched_s": 0.0, "per_launch_s": 0.0, "unaccounted_s": 0.0}
    in_slot = [end - begin - t.user_attrs.get(R.WALL_S, 0.0) for begin, end, t in spans
               if t.user_attrs.get(R.LAUNCHED)]
    not_launched = sum(end - begin for begin, end, t in spans if not t.user_attrs.get(R.LAUNCHED))
    between = sum(max(0.0, spans[i + 1][0] - spans[i][1]) for i in range(len(spans) - 1))
    startup = spans[0][0] - started_at
    tail = finished_at - max(end for _, end, _ in spans)
    trial_wall = sum(t.user_attrs.get(R.WALL_S, 0.0) for _, _, t in spans
                     if t.user_attrs.get(R.LAUNCHED))
    accounted = startup + sum(in_slot) + between + not_launched + tail
    return {"startup_s": startup, "tail_s": tail, "in_slot_s": sum(in_slot),
            "between_s": between, "not_launched_s": not_launched,
            # What one launch costs the orchestrator while the sweep runs: its slot and a gap.
            "per_launch_s": (sum(in_slot) + between) / len(in_slot) if in_slot else 0.0,
            "unaccounted_s": (wall - trial_wall) - accounted}


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
    cost = overhead(a, wall)
    trial_wall, share = cost["sum_trial_wall_s"], cost["overhead"]

    # Replay the same proposals, in order, with every stop switched off.
    storage = study_url(args.runs, no_stop)
    (args.runs / no_stop).mkdir(parents=True, exist_ok=True)
    b = optuna.create_study(study_name=no_stop, storage=storage, direction="maximize")
    for t in launched(a):
        b.enqueue_trial(t.params, user_attrs={R.ROLE: t.user_attrs.get(R.ROLE, R.SAMPLED_ROLE)})
    sweep(args.runs, no_stop, len(launched(a)), NO_STOPPING + ["sweep.allow_changed_space=true"])
    b = load(args.runs, no_stop)
    full_wall = sum(t.user_attrs.get(R.WALL_S, 0.0) for t in launched(b))
    reasons_a = [t.user_attrs.get(R.REASON) for t in launched(a)]
    result = {
        "date": time.strftime("%Y-%m-%d"), "n_trials": args.n_trials,
        "sweep_wall_s": wall, "sum_trial_wall_s": trial_wall, "overhead": share,
        "reasons_with_stopping": reasons_a,
        "reasons_without_stopping": [t.user_attrs.get(R.REASON) for t in launched(b)],
        "trial_time_with_stopping_s": trial_wall, "trial_time_without_stopping_s": full_wall,
        "saved_fraction": 1 - trial_wall / full_wall if full_wall else None,
        "best_with_stopping": best(a), "best_without_stopping": best(b),
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "sweep_costs.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"(a) sweep wall {wall:.1f} s, trial processes {trial_wall:.1f} s, "
          f"overhead {100 * share:.2f} % (target < 2 %)")
    print(f"(b) trial time with stopping {trial_wall:.1f} s vs run to completion "
          f"{full_wall:.1f} s: saved {100 * result['saved_fraction']:.1f} %")
    print(f"    stop reasons: {reasons_a}")
    print(f"    best with stopping:    {result['best_with_stopping']}")
    print(f"    best without stopping: {result['best_without_stopping']}")


if __name__ == "__main__":
    cli(main)
