"""Launches spent on out-of-memory trials, with and without the cost model's predicted_oom.

    .venv/bin/python -m bench.oom_avoided                # two sweeps of 8 real trials, ~8 min
    .venv/bin/python -m bench.oom_avoided --budget 1.6   # another memory budget (GiB)

The same CPU space (a wider GPT: d_model 512, seq 512; micro-batches 1/2/4/8 x memory
level O0/O1, so the larger micro-batch sizes exceed the budget) is swept twice with the
same sampler seed: once with ``sweep.predict.rule_out_oom=false`` (OOMs found by
launching), once with the default (points predicted over budget x 1.1 ruled out before
launch). Each sweep starts from a fresh cache: the model begins at the CPU profile's
priors and refits as trials finish. Reported: launches ending oom, points ruled out as
predicted_oom, and the best feasible configuration each found.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

from autotune.study.layout import study_url
from autotune.study.records import load_records
from bench._common import REPO, child_env, cli, log, print_table, write_result
from trials.contract.outcomes import Outcome

SPACE = """name: oomspace
knobs:
  train.micro_batches: [1, 2, 4, 8]
  runtime.memory_optimize_level: [O0, O1]
"""
COMMON = ["search=oomspace", "workload=gpt_small", "workload.d_model=512", "workload.seq_len=512",
          "workload.n_heads=8", "data=synthetic", "run.warmup_steps=1", "run.measure_steps=2",
          "sweep.n_trials=8", "sweep.progress=false", "sweep.seed=7", "train.micro_batches=8"]


def sweep(runs: Path, conf: Path, study: str, budget: float, extra: list[str]) -> float:
    cache = Path(tempfile.mkdtemp(prefix="autotune-oom-cache-"))
    env = {**child_env(), "AUTOTUNE_CACHE": str(cache)}
    argv = [sys.executable, "-m", "autotune", "sweep", f"hydra.searchpath=[file://{conf}]",
            f"sweep.runs_dir={runs}", f"sweep.study={study}",
            f"guard.memory_budget_gib={budget}", *COMMON, *extra]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def summarise(runs: Path, study: str, wall: float) -> dict:
    s = optuna.load_study(study_name=study, storage=study_url(runs, study))
    trials = s.trials
    records = load_records(s, trials=trials)
    launched = [r for r in records if r.launched]
    feasible = {t.number for t in trials if all(v <= 0 for v in t.constraints.values())}
    ok = [t for t, r in zip(trials, records) if r.ok and r.reason is Outcome.OK
          and t.number in feasible]
    best = max(ok, key=lambda t: t.value, default=None)
    return {"wall_s": wall, "launched": len(launched),
            "oom_launches": sum(1 for r in launched if r.reason is Outcome.OOM),
            "predicted_oom": sum(1 for r in records if r.reason is Outcome.PREDICTED_OOM),
            "best_params": best.params if best else None,
            "best_tokens_per_s": best.value if best else None,
            "trials": [{"number": r.number, "params": r.params,
                        "reason": r.reason.value if r.reason is not None else None,
                        "detail": r.detail[:200], "peak_gib": r.peak_memory_gib,
                        "predicted_peak_gib": r.prediction.peak_gib if r.prediction else None}
                       for r in records]}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.oom_avoided")
    parser.add_argument("--budget", type=float, default=1.6, help="memory budget, GiB")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autotune-oom-"))
    conf = work / "conf"
    (conf / "search").mkdir(parents=True)
    (conf / "search" / "oomspace.yaml").write_text(SPACE)
    results = {}
    for name, extra in (("without", ["sweep.predict.rule_out_oom=false"]), ("with", [])):
        log(f"sweep {name} predicted_oom, budget {args.budget:g} GiB")
        wall = sweep(work / "runs", conf, name, args.budget, extra)
        results[name] = summarise(work / "runs", name, wall)
        log(f"  {results[name]['launched']} launched, {results[name]['oom_launches']} oom, "
            f"{results[name]['predicted_oom']} predicted_oom, {wall:.0f} s")
    rows = [[name, r["launched"], r["oom_launches"], r["predicted_oom"],
             f"{r['best_tokens_per_s']:,.0f}" if r["best_tokens_per_s"] else "-",
             r["best_params"], f"{r['wall_s']:.0f}"] for name, r in results.items()]
    print_table(["predicted_oom", "launched", "oom launches", "ruled out", "best tok/s",
                 "best params", "wall s"], rows)
    for name, r in results.items():
        print(f"\n{name}:")
        print_table(["#", "params", "reason", "peak GiB", "predicted GiB"],
                    [[t["number"], t["params"], t["reason"], t["peak_gib"],
                      t["predicted_peak_gib"]] for t in r["trials"]])
    same = results["with"]["best_params"] == results["without"]["best_params"]
    print(f"\nsame best configuration found: {same}")
    print(f"wrote {write_result('oom_avoided', {'budget_gib': args.budget, **results})}")


if __name__ == "__main__":
    cli(main)
