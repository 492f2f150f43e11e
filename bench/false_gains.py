"""How often does a sweep call a knob with no effect "better than the baseline"?

The space holds only knobs that do nothing to this workload's speed:
``data.num_workers`` 1/2 (the text source's per-sample work is too light for workers to
matter; the issue that asked for this benchmark saw a sweep crown it at +41 %) and
``runtime.memory_optimize_level`` O0/O1 (+65 MB RSS, same speed on CPU,
docs/mindspore-cpu.md). Every configuration is as fast as the baseline, so any verdict
"better than the baseline" is false. Each repeat is a real default sweep (``python -m
autotune sweep``, the grid of 4 points, nothing pruned) of the default workload.

Reported per repeat and pooled: the naive verdict (the leaderboard's fastest is not the
baseline, and by how much), autotune's verdict (a gain whose 95 % interval excludes zero,
autotune/study/noise.py), and what ``export`` picks.

    .venv/bin/python -m bench.false_gains                 # 4 sweeps
    .venv/bin/python -m bench.false_gains --repeats 2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from autotune.study.layout import study_url
from bench._common import REPO, child_env, cli, log, print_table, write_result

NAME = "false_gains"
KNOBS = {"data.num_workers": [1, 2], "runtime.memory_optimize_level": ["O0", "O1"]}


def sweep(conf: Path, runs: Path, study: str) -> None:
    argv = [sys.executable, "-m", "autotune", "sweep", f"hydra.searchpath=[file://{conf}]",
            "search=noeffect", "sweep.sampler=grid", "sweep.n_trials=4",
            "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0",
            f"sweep.runs_dir={runs}", f"sweep.study={study}", "sweep.progress=false"]
    proc = subprocess.run(argv, cwd=REPO, env=child_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                         f"\n{proc.stderr[-2000:]}")


def verdicts(runs: Path, study: str, prior_cv: float) -> dict:
    import optuna

    from autotune.settings import ExportSettings
    from autotune.study import selection
    from autotune.study.choice import choose_trial
    from autotune.study.records import load_records

    s = optuna.load_study(study_name=study, storage=study_url(runs, study))
    records = load_records(s)
    level = selection.annotate(records, prior_cv)
    base = selection.baseline(records)
    others = [r for r in selection.feasible_records(records, None) if r is not base]
    fastest = selection.best(records, None)
    chosen, why = choose_trial(s, records, ExportSettings(), prior_cv=prior_cv)
    return {
        "comparisons": len(others),
        "false_better": sum(1 for r in others if r.vs_baseline and r.vs_baseline.better),
        "naive_crown": fastest is not base,
        "naive_gain": fastest.tokens_per_s / base.tokens_per_s - 1,
        "gains": [r.vs_baseline.text() for r in others if r.vs_baseline],
        "export_baseline": chosen is base, "export_why": why, "noise_cv": level.cv,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args(argv)
    from trials.contract.compose import compose
    from trials.contract.schema import to_trial_config

    prior_cv = to_trial_config(compose("trial", [])).hardware.cost.run_to_run_cv
    work = Path(tempfile.mkdtemp(prefix="autotune-false-gains-"))
    (work / "conf" / "search").mkdir(parents=True)
    (work / "conf" / "search" / "noeffect.yaml").write_text(
        yaml.safe_dump({"name": "noeffect", "knobs": KNOBS}))
    rows, results = [], []
    for rep in range(args.repeats):
        sweep(work / "conf", work / "runs", f"noeffect-{rep}")
        v = verdicts(work / "runs", f"noeffect-{rep}", prior_cv)
        results.append(v)
        rows.append([rep, v["comparisons"], v["false_better"], v["naive_crown"],
                     100 * v["naive_gain"], v["export_baseline"]])
        log(f"sweep {rep}: " + "; ".join(v["gains"]) + f"; export: {v['export_why']}")
    headers = ["sweep", "comparisons", "false 'better'", "naive winner != baseline",
               "naive gain %", "export = baseline"]
    print_table(headers, rows)
    total = sum(v["comparisons"] for v in results)
    false = sum(v["false_better"] for v in results)
    crowns = sum(v["naive_crown"] for v in results)
    log(f"autotune's false 'better than baseline' verdicts: {false}/{total}; the naive "
        f"leaderboard crowned a no-effect knob in {crowns}/{len(results)} sweeps; export "
        f"kept the baseline in {sum(v['export_baseline'] for v in results)}/{len(results)}")
    path = write_result(NAME, {"repeats": args.repeats, "knobs": KNOBS, "headers": headers,
                               "rows": rows, "results": results, "false_better": false,
                               "comparisons": total, "naive_crowns": crowns})
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    cli(main)
