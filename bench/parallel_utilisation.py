"""Device utilisation of concurrent trials (``sweep.parallel_trials=K``) on a simulated pool.

A real ``python -m autotune sweep`` on the 8-device ``hardware=gpu_a100`` profile, with
the trial program replaced by ``bench/sleep_trial.py`` (``sweep.trial_command``): each
trial sleeps 1.2-2.4 s depending on its devices and micro-batches and writes probe.json
(start, end, ``CUDA_VISIBLE_DEVICES``). No GPU is needed: with a trial command set the
sweep does not check that the GPU backend runs here. The search space mixes trial sizes:
``parallel.split`` of 1, 2, 4 and 8 devices x ``train.micro_batches`` [1, 2, 4, 8] x
``data.num_workers`` [1, 2, 4] (48 points), random sampler, 24 launches.

Utilisation = sum over runs of devices x run time in a window / (8 x window):

* **busy while proposals remain**: from the first start after the baseline (which the
  dispatcher runs alone) to the last start, when the budget is fully claimed;
* **baseline window**: the baseline's own run (1 of 8 devices busy by construction);
* **whole run**: from the baseline's start to the last end, tail included.

    .venv/bin/python -m bench.parallel_utilisation                 # K=8, 3 seeds
    .venv/bin/python -m bench.parallel_utilisation --ks 8 4 1 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import REPO, cli, log, median, print_table, write_result

NAME = "parallel_utilisation"
DEVICES = 8
TARGET = 0.90
HANG_S = 120  # a sweep of ~1 min still running after this is hung
SPACE = """name: util
knobs:
  parallel.split: ["1x1x1", "2x1x1", "4x1x1", "8x1x1"]
  train.micro_batches: [1, 2, 4, 8]
  data.num_workers: [1, 2, 4]
"""


def sweep_argv(work: Path, study: str, k: int, n_trials: int, seed: int) -> list[str]:
    trial = [sys.executable, str(REPO / "bench" / "sleep_trial.py")]
    return [sys.executable, "-m", "autotune", "sweep", f"hydra.searchpath=[file://{work}/conf]",
            "search=util", f"sweep.runs_dir={work}/runs", f"sweep.study={study}",
            "sweep.progress=false", "workload=gpt_tiny", "hardware=gpu_a100",
            "train.global_batch=64", f"sweep.trial_command=[{','.join(trial)}]",
            f"sweep.parallel_trials={k}", f"sweep.n_trials={n_trials}", "sweep.sampler=random",
            "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0", f"sweep.seed={seed}"]


def busy(runs: list[dict], t0: float, t1: float, begin: str = "exec") -> float:
    """Share of the 8 devices busy over [t0, t1]; a run is busy from ``begin`` (its
    process's creation, or ``start``: after its imports) to its end."""
    if t1 <= t0:
        return float("nan")
    used = sum(r["devices"] * max(0.0, min(r["end"], t1) - max(r[begin], t0)) for r in runs)
    return used / (DEVICES * (t1 - t0))


def one_run(work: Path, k: int, n_trials: int, seed: int) -> dict:
    study = f"k{k}-s{seed}"
    argv = sweep_argv(work, study, k, n_trials, seed)
    env = dict(os.environ, AUTOTUNE_SLEEP_SEED=str(seed),
               AUTOTUNE_CACHE=str(work / "cache"))
    began = time.time()
    try:
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=HANG_S)
    except subprocess.TimeoutExpired:  # the sweep hung: report it, measure nothing
        return {"k": k, "seed": seed, "hung": True, "argv": argv}
    wall = time.time() - began
    if proc.returncode != 0:
        raise RuntimeError(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    verdict = next((line for line in reversed(proc.stdout.splitlines())
                    if line.startswith(("done:", "search space", "stopped"))), "?")
    runs = [json.loads(p.read_text()) for p in sorted((work / "runs" / study).glob(
        "trial-*/probe.json"))]
    runs.sort(key=lambda r: r["exec"])
    baseline, rest = runs[0], runs[1:]
    last_start = max(r["exec"] for r in runs)
    t0 = min(r["exec"] for r in rest) if rest else baseline["end"]
    gaps = sorted(r["exec"] - baseline["end"] for r in rest)[:1]
    return {
        "k": k, "seed": seed, "runs": len(runs), "budget": n_trials, "verdict": verdict,
        "busy": busy(rest, t0, last_start),
        "busy_sleeping": busy(rest, t0, last_start, begin="start"),
        "baseline_busy": busy(runs, baseline["exec"], baseline["end"]),
        "whole": busy(runs, baseline["exec"], max(r["end"] for r in runs)),
        "startup_s": median([r["start"] - r["exec"] for r in runs]),
        "after_baseline_s": gaps[0] if gaps else float("nan"),
        "baseline_s": baseline["end"] - baseline["exec"], "window_s": last_start - t0,
        "tail_s": max(r["end"] for r in runs) - last_start, "sweep_wall_s": wall,
        "argv": argv, "probes": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[8])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--n-trials", type=int, default=24)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="autotune-util-") as tmp:
        work = Path(tmp)
        (work / "conf" / "search").mkdir(parents=True)
        (work / "conf" / "search" / "util.yaml").write_text(SPACE)
        for k in args.ks:
            for seed in args.seeds:
                r = one_run(work, k, args.n_trials, seed)
                results.append(r)
                if r.get("hung"):
                    log(f"K={k} seed={seed}: HUNG (still running after {HANG_S} s; killed)")
                    continue
                log(f"K={k} seed={seed}: {r['runs']} runs (budget {r['budget']}), busy "
                    f"{100 * r['busy']:.1f} % over {r['window_s']:.1f} s, whole "
                    f"{100 * r['whole']:.1f} %, sweep {r['sweep_wall_s']:.0f} s; {r['verdict']}")
        print("command (each run; the study name and seed vary):")
        print("  " + " ".join(results[0]["argv"]).replace(tmp, "$TMP"))
    rows = []
    for k in args.ks:
        mine = [r for r in results if r["k"] == k and not r.get("hung")]
        hung = sum(1 for r in results if r["k"] == k and r.get("hung"))
        if not mine:
            rows.append([k, 0, "-", "-", "-", "-", "-", "-", "-", "-", "-", hung])
            continue

        def cell(key: str, scale: float = 100.0, fmt: str = ".1f", mine=mine) -> str:
            vals = [scale * r[key] for r in mine]
            return f"{median(vals):{fmt}} ({min(vals):{fmt}}..{max(vals):{fmt}})"

        rows.append([k, len(mine), cell("runs", 1, ".0f"), cell("busy"), cell("busy_sleeping"),
                     cell("window_s", 1), cell("baseline_busy"), cell("whole"),
                     cell("tail_s", 1), cell("startup_s", 1, ".2f"),
                     cell("sweep_wall_s", 1, ".0f"), hung])
    print_table(["K", "reps", f"runs (budget {args.n_trials})", "busy while proposals remain %",
                 "same, from sleep start %", "window s", "baseline window %", "whole run %",
                 "tail s", "trial start-up s", "sweep wall s", "hung"], rows)
    for k in args.ks:
        vals = [r["busy"] for r in results if r["k"] == k and not r.get("hung")]
        if not vals:
            continue
        busy_k = median(vals)
        print(f"K={k}: busy while proposals remain {100 * busy_k:.1f} % (median): target "
              f">= {100 * TARGET:.0f} % {'met' if busy_k >= TARGET else 'MISSED'}")
    short = [r for r in results if not r.get("hung") and r["runs"] < r["budget"]]
    if short:
        print(f"note: {len(short)} of {len(results)} sweeps ended with fewer runs than the "
              "budget (claimed proposals still waiting for devices were re-queued, not run)")
    write_result(NAME, {"ks": args.ks, "seeds": args.seeds, "n_trials": args.n_trials,
                        "results": [{k: v for k, v in r.items() if k != "argv"}
                                    for r in results]})


if __name__ == "__main__":
    cli(main)
