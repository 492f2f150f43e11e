"""Do short trials rank knob settings the way long runs do?

Each setting runs twice: as a short trial (the configured run.warmup_steps /
run.measure_steps) and as a 10x longer one (run.measure_steps x 10, same
warm-up). The two runs of a setting are adjacent in time (alternating which goes
first) so that drift of this shared VM hits both alike. The agreement is the
Spearman rank correlation of their ``performance.tokens_per_s``
(``scipy.stats.spearmanr``).

The model is the GPT of ``workload=gpt_small`` cut to 2 layers and 64 tokens
(d_model 256), on synthetic data, so that the PyNative settings' long runs fit
the time budget; the knob effects (mode, fp16, threads, micro-batches,
recompute) are still those of a compute-bound step.

    .venv/bin/python -m bench.trial_rank_correlation            # 10 settings, 10x
    .venv/bin/python -m bench.trial_rank_correlation --quick    # 6 settings, 5x
"""

from __future__ import annotations

import argparse
import time

from bench._common import (
    add_quiet_argument,
    cli,
    load_note,
    log,
    print_table,
    run_trial,
    write_result,
)

NAME = "trial_rank_correlation"
BASE = ["workload=gpt_small", "workload.n_layers=2", "workload.seq_len=64", "data=synthetic"]
TARGET_RHO = 0.9

#: (label, overrides). Chosen to cover each knob both ways, not tuned on the results.
SETTINGS: list[tuple[str, list[str]]] = [
    ("graph fp32", []),
    ("graph fp32 threads=1", ["runtime.threads=1"]),
    ("graph fp32 mb=2", ["train.micro_batches=2"]),
    ("graph fp32 recompute", ["train.recompute=full"]),
    ("graph fp16", ["precision=fp16"]),
    ("graph fp16 mb=2 threads=1", ["precision=fp16", "train.micro_batches=2",
                                   "runtime.threads=1"]),
    ("graph fp32 mb=2 recompute threads=1", ["train.micro_batches=2", "train.recompute=full",
                                             "runtime.threads=1"]),
    ("pynative fp32", ["runtime.mode=pynative"]),
    ("pynative fp32 threads=1", ["runtime.mode=pynative", "runtime.threads=1"]),
    ("pynative fp16", ["runtime.mode=pynative", "precision=fp16"]),
]
QUICK = [0, 1, 2, 4, 7, 9]


def default_steps() -> tuple[int, int]:
    """The configured run.warmup_steps / run.measure_steps (no MindSpore import)."""
    from trials.contract.compose import compose
    from trials.contract.schema import to_trial_config

    cfg = to_trial_config(compose("trial", BASE))
    return cfg.run.warmup_steps, cfg.run.measure_steps


def ranks_table(labels: list[str], short: list[float], long: list[float]) -> list[list]:
    def rank(values):
        order = sorted(range(len(values)), key=lambda i: -values[i])
        out = [0] * len(values)
        for r, i in enumerate(order):
            out[i] = r + 1
        return out

    rs, rl = rank(short), rank(long)
    return [[labels[i], short[i], long[i], short[i] / long[i], rs[i], rl[i]]
            for i in range(len(labels))]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trial_rank_correlation",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 settings, long run = 5x")
    parser.add_argument("--factor", type=int, help="long run's measure_steps multiple "
                                                   "(default 10; quick 5)")
    add_quiet_argument(parser)
    args = parser.parse_args()
    from scipy.stats import kendalltau, spearmanr

    factor = args.factor or (5 if args.quick else 10)
    chosen = [SETTINGS[i] for i in QUICK] if args.quick else SETTINGS
    warmup, measure = default_steps()
    long_measure = measure * factor
    log(f"{len(chosen)} settings x (short: {warmup} + {measure} steps, long: {warmup} + "
        f"{long_measure} steps); base: {' '.join(BASE)}")

    started = time.perf_counter()
    results = []
    for i, (label, extra) in enumerate(chosen):
        overrides = [*BASE, *extra]
        kinds = ("short", "long") if i % 2 == 0 else ("long", "short")
        entry: dict = {"label": label, "overrides": overrides, "order": list(kinds)}
        for kind in kinds:
            steps = [] if kind == "short" else [f"run.measure_steps={long_measure}"]
            run = run_trial([*overrides, *steps], timeout_s=600,
                            quiet_wait_s=args.max_wait).check()
            entry[kind] = {"tokens_per_s": run.tokens_per_s,
                           "step_time_median_s": run.step_time_median_s,
                           "step_time_cv": run.performance.get("step_time_cv"),
                           "measured_steps": run.performance.get("measured_steps"),
                           "wall_s": run.wall_s, "load": run.load}
            log(f"{label:38s} {kind:5s}: {run.tokens_per_s:8,.0f} tok/s "
                f"({run.wall_s:5.1f} s wall, other jobs {run.load['foreign_cores']:.2f} cores)")
        results.append(entry)

    labels = [r["label"] for r in results]
    short = [r["short"]["tokens_per_s"] for r in results]
    long = [r["long"]["tokens_per_s"] for r in results]
    rho, p_value = spearmanr(short, long)
    tau, _ = kendalltau(short, long)
    rho, tau = float(rho), float(tau)
    best_short, best_long = max(range(len(short)), key=short.__getitem__), \
        max(range(len(long)), key=long.__getitem__)
    print()
    print_table(["setting", "short tok/s", "long tok/s", "short/long", "rank short",
                 "rank long"], ranks_table(labels, short, long))
    met = rho >= TARGET_RHO
    print(f"\nSpearman rho {rho:.3f} (p {p_value:.2g}), Kendall tau {tau:.3f}, "
          f"best setting short: {labels[best_short]!r}, long: {labels[best_long]!r}  "
          f"target rho >= {TARGET_RHO}: {'met' if met else 'MISSED'}")
    note = load_note([r[k]["load"] for r in results for k in ("short", "long")])
    print(note)
    path = write_result(NAME, {
        "quick": args.quick, "base": BASE, "warmup_steps": warmup, "short_measure_steps": measure,
        "long_measure_steps": long_measure, "settings": results,
        "short_tokens_per_s": short, "long_tokens_per_s": long, "spearman_rho": rho,
        "spearman_p": float(p_value), "kendall_tau": tau,
        "best_short": labels[best_short], "best_long": labels[best_long],
        "target_rho": TARGET_RHO, "target_met": met,
        "load_note": note,
        "elapsed_s": time.perf_counter() - started})
    print(f"wrote {path}")


if __name__ == "__main__":
    cli(main)
