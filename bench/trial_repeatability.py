"""Repeatability: the same trial, run N times in a row; how much does tokens/s move?

Each repeat is a fresh ``python -m trials.train`` process in its own working
directory with the default knobs of ``workload=gpt_small`` (graph mode, fp32,
text data, run.warmup_steps / run.measure_steps as configured). The spread of
``performance.tokens_per_s`` across repeats (coefficient of variation, sample
standard deviation / mean) is the noise floor a tuner's comparisons sit on.

    .venv/bin/python -m bench.trial_repeatability            # 5 repeats
    .venv/bin/python -m bench.trial_repeatability --quick    # 3 repeats
    .venv/bin/python -m bench.trial_repeatability -n 8 workload=gpt_tiny   # other overrides
"""

from __future__ import annotations

import argparse
import time

from bench._common import (
    add_quiet_argument,
    cli,
    cv,
    load_note,
    log,
    median,
    print_table,
    run_trial,
    write_result,
)

NAME = "trial_repeatability"
#: Post-hoc view: the tokens/s a trial would report had its warm-up lasted up to this step
#: (MindSpore's first ~4 steps after the compile step run ~30 % slow on this CPU).
STEADY_FROM_STEP = 5
DEFAULT_OVERRIDES = ["workload=gpt_small"]
TARGET_CV = 0.03


def steady_tokens_per_s(steps: list[dict], from_step: int) -> float:
    """tokens/s from the measured steps numbered >= from_step (median step time)."""
    kept = [s for s in steps if s.get("phase") == "measure" and s["step"] >= from_step]
    if not kept:
        return float("nan")
    return median([s["tokens"] for s in kept]) / median([s["step_s"] for s in kept])


def median_rule_tokens_per_s(steps: list[dict]) -> float:
    """tokens/s of the measured steps by their median step time: the trial's rule until
    2026-12-05 (now the mean; trials/contract/stats.py), read side by side on the same runs."""
    return steady_tokens_per_s(steps, 0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trial_repeatability",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("-n", "--repeats", type=int, help="repeats (default 5; quick 3)")
    add_quiet_argument(parser)
    parser.add_argument("overrides", nargs="*",
                        help=f"trial overrides (default: {' '.join(DEFAULT_OVERRIDES)})")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    overrides = args.overrides or DEFAULT_OVERRIDES
    log(f"{repeats} repeats of: python -m trials.train {' '.join(overrides)}")

    started = time.perf_counter()
    runs = []
    for i in range(repeats):
        run = run_trial(overrides, quiet_wait_s=args.max_wait).check()
        perf = run.performance
        runs.append({"tokens_per_s": run.tokens_per_s,
                     "step_time_median_s": run.step_time_median_s,
                     "step_time_cv": perf.get("step_time_cv"),
                     "measured_steps": perf.get("measured_steps"),
                     "compile_s": perf.get("compile_s"),
                     "data_wait_share": perf.get("data_wait_share"),
                     "mfu": perf.get("mfu"), "wall_s": run.wall_s, "load": run.load,
                     "steady_tokens_per_s": steady_tokens_per_s(run.steps, STEADY_FROM_STEP),
                     "median_rule_tokens_per_s": median_rule_tokens_per_s(run.steps),
                     "step_s": [s["step_s"] for s in run.steps]})
        log(f"repeat {i + 1}: {run.tokens_per_s:,.0f} tok/s  "
            f"(step {run.step_time_median_s * 1e3:.1f} ms, within-run step CV "
            f"{perf.get('step_time_cv', 0) * 100:.1f} %, {run.wall_s:.1f} s wall, other jobs "
            f"{run.load['foreign_cores']:.2f} cores)")

    tps = [r["tokens_per_s"] for r in runs]
    med, spread = median(tps), cv(tps)
    steady = [r["steady_tokens_per_s"] for r in runs]
    by_median = [r["median_rule_tokens_per_s"] for r in runs]
    rows = [[i + 1, r["tokens_per_s"], r["median_rule_tokens_per_s"],
             r["step_time_median_s"] * 1e3, (r["step_time_cv"] or 0) * 100,
             r["steady_tokens_per_s"], r["compile_s"], r["wall_s"]] for i, r in enumerate(runs)]
    rows.append(["median", med, median(by_median),
                 median([r["step_time_median_s"] for r in runs]) * 1e3, "", median(steady),
                 "", ""])
    rows.append(["CV %", spread * 100, cv(by_median) * 100, "", "", cv(steady) * 100, "", ""])
    print()
    print_table(["repeat", "tokens/s", "by median step", "median step ms", "in-run step CV %",
                 f"tok/s steps>={STEADY_FROM_STEP}", "compile s", "wall s"], rows)
    met = spread <= TARGET_CV
    print(f"\ntokens/s median {med:,.0f}, CV {spread * 100:.2f} % across {repeats} repeats "
          f"(min {min(tps):,.0f}, max {max(tps):,.0f}, max/min {max(tps) / min(tps):.3f})  "
          f"target CV <= {TARGET_CV * 100:.0f} %: {'met' if met else 'MISSED'}")
    print(f"post hoc, measured steps >= {STEADY_FROM_STEP} only (as if warm-up lasted to step "
          f"{STEADY_FROM_STEP - 1}): median {median(steady):,.0f} tok/s, "
          f"CV {cv(steady) * 100:.2f} %")
    note = load_note([r["load"] for r in runs])
    print(note)
    path = write_result(NAME, {
        "quick": args.quick, "repeats": repeats, "overrides": overrides, "runs": runs,
        "tokens_per_s": tps, "tokens_per_s_median": med, "tokens_per_s_cv": spread,
        "max_over_min": max(tps) / min(tps), "target_cv": TARGET_CV, "target_met": met,
        "steady_from_step": STEADY_FROM_STEP, "steady_tokens_per_s": steady,
        "steady_tokens_per_s_median": median(steady), "steady_tokens_per_s_cv": cv(steady),
        "median_rule_tokens_per_s_cv": cv(by_median),
        "load_note": note,
        "elapsed_s": time.perf_counter() - started})
    print(f"wrote {path}")


if __name__ == "__main__":
    cli(main)
