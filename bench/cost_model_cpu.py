"""Cost model against real MindSpore trials on this CPU: calibrate on half, test on the other.

    .venv/bin/python -m bench.cost_model_cpu            # 18 configurations, ~10 min
    .venv/bin/python -m bench.cost_model_cpu --quick    # 8 configurations, ~4 min

    .venv/bin/python -m bench.cost_model_cpu --reuse runs/bench/cost_model_cpu.json
                                                         # predictions only, same measurements

Each configuration runs once as a real trial (synthetic tokens, 1 compile + 1 warm-up +
3 measured steps) and is predicted by autotune/plan. The split is stratified: the
configurations sharing a variation (fp16, dp=2, accumulation, ... or none) alternate
between calibration and held out, so every variation with two or more configurations is
on both sides. The constants are fitted by least squares on the calibration half and the
errors reported on the held-out half, for peak memory per rank (also its model-dependent
part: peak minus an empty MindSpore process) and for step time (MAPE and Spearman).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from autotune.plan.calibration import fit
from autotune.plan.costmodel import CostModel
from autotune.plan.predict import Constants
from autotune.settings import SweepConfig
from bench._common import (
    add_quiet_argument,
    child_env,
    cli,
    load_note,
    log,
    print_table,
    run_trial,
    write_result,
)
from trials.contract.compose import compose
from trials.contract.schema import to_trial_config

COMMON = ["workload=gpt_small", "data=synthetic", "workload.n_heads=8", "run.warmup_steps=1",
          "run.measure_steps=3", "guard.memory_budget_gib=20", "train.global_batch=8"]

#: (d_model, layers, seq, extra overrides): layers, width, sequence, micro-batch size and
#: accumulation, recompute, dp 1/2, fp16/fp32.
CONFIGS = [
    (512, 2, 256, []), (512, 4, 256, []), (512, 4, 512, []),
    (512, 4, 256, ["train.micro_batches=2"]), (512, 4, 256, ["train.micro_batches=4"]),
    (512, 4, 256, ["train.recompute=full"]), (512, 4, 256, ["precision=fp16"]),
    (512, 4, 256, ["parallel.dp=2"]), (768, 2, 256, []), (768, 4, 128, []),
    (768, 4, 256, []), (768, 4, 256, ["train.micro_batches=2"]), (768, 6, 128, []),
    (768, 4, 256, ["parallel.dp=2"]), (768, 4, 256, ["precision=fp16"]),
    (768, 4, 512, ["train.micro_batches=4"]), (1024, 2, 256, []),
    (1024, 4, 128, ["train.micro_batches=2"]),
]
QUICK = [CONFIGS[i] for i in (0, 1, 3, 5, 7, 9, 10, 13)]


def overrides_of(config) -> list[str]:
    d_model, layers, seq, extra = config
    return [*COMMON, f"workload.d_model={d_model}", f"workload.n_layers={layers}",
            f"workload.seq_len={seq}", *extra]


def empty_process_gib() -> float:
    """Peak RSS of a MindSpore process that ran one op: what any trial holds regardless."""
    code = ("import resource, numpy as np, mindspore as ms\nms.set_device('CPU')\n"
            "x = ms.Tensor(np.ones((4, 4), np.float32))\n(x + x).asnumpy()\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                         text=True, check=True).stdout
    return int(out.strip().splitlines()[-1]) / 1024**2


def mape(predicted, measured) -> float:
    p, m = np.asarray(predicted), np.asarray(measured)
    return float(np.mean(np.abs(p - m) / m))


def largest(predicted, measured) -> float:
    rel = (np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)
    return float(rel[np.argmax(np.abs(rel))])


def roles(runs: list[dict]) -> list[str]:
    """Stratified split: within each variation, alternate calibrate / held out."""
    seen: dict[tuple, int] = {}
    out = []
    for r in runs:
        key = tuple(r["overrides"][len(COMMON) + 3:])  # what varies besides the dimensions
        out.append("calibrate" if seen.get(key, 0) % 2 == 0 else "held out")
        seen[key] = seen.get(key, 0) + 1
    return out


def measure(configs, max_wait: float) -> tuple[float, list[dict]]:
    baseline = empty_process_gib()
    log(f"empty MindSpore process: {baseline:.3f} GiB peak RSS")
    runs = []
    for i, config in enumerate(configs):
        ov = overrides_of(config)
        dp = next((int(o.split("=")[1]) for o in ov if o.startswith("parallel.dp=")), 1)
        run = run_trial(ov, timeout_s=600, quiet_wait_s=max_wait, world_size=dp).check()
        res, perf = run.summary["resources"], run.performance
        runs.append({"overrides": ov, "peak_gib": res["peak_rss_gib_max_rank"],
                     "step_s": perf["step_time_median_s"],
                     "data_wait_s": perf["data_wait_share"] * perf["step_time_median_s"],
                     "load": run.load})
        log(f"{i + 1}/{len(configs)} {' '.join(ov[len(COMMON):])}: "
            f"peak {runs[-1]['peak_gib']:.3f} GiB, step {runs[-1]['step_s']:.3f} s")
    return baseline, runs


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cost_model_cpu")
    parser.add_argument("--quick", action="store_true", help="8 configurations")
    parser.add_argument("--reuse", type=Path, metavar="JSON",
                        help="take the measurements of an earlier run's result file")
    add_quiet_argument(parser)
    args = parser.parse_args()
    if args.reuse:
        earlier = json.loads(args.reuse.read_text())
        baseline = earlier["empty_process_gib"]
        runs = [{k: r[k] for k in ("overrides", "peak_gib", "step_s", "data_wait_s", "load")}
                for r in earlier["runs"]]
        log(f"measurements of {args.reuse} ({earlier['date']})")
    else:
        baseline, runs = measure(QUICK if args.quick else CONFIGS, args.max_wait)
    cfgs = [to_trial_config(compose("sweep", r["overrides"], schema=SweepConfig)) for r in runs]
    model = CostModel.for_profile(cfgs[0].hardware)
    points = [model.measurement(c, peak_gib=r["peak_gib"], step_s=r["step_s"],
                                data_wait_s=r["data_wait_s"]) for c, r in zip(cfgs, runs)]
    role_of = roles(runs)
    train = [p for p, role in zip(points, role_of) if role == "calibrate"]
    constants = fit(train, Constants.priors(cfgs[0].hardware))
    model.constants = constants
    rows, result_rows = [], []
    for i, (c, r) in enumerate(zip(cfgs, runs)):
        p = model.predict_config(c)
        state = p.memory.states
        variable = state + p.memory.dynamic
        role = role_of[i]
        result_rows.append({**r, "role": role, "predicted_peak_gib": p.peak_gib,
                            "predicted_step_s": p.step_s,
                            "model_dependent_gib": variable / 1024**3})
        rows.append([i, role, " ".join(r["overrides"][len(COMMON):]), f"{r['peak_gib']:.3f}",
                     f"{p.peak_gib:.3f}", f"{100 * (p.peak_gib / r['peak_gib'] - 1):+.1f}",
                     f"{r['step_s']:.3f}", f"{p.step_s:.3f}",
                     f"{100 * (p.step_s / r['step_s'] - 1):+.1f}"])
    print_table(["#", "role", "config", "peak GiB", "predicted", "err %", "step s",
                 "predicted", "err %"], rows)
    held = [x for x in result_rows if x["role"] == "held out"]
    hp = [x["predicted_peak_gib"] for x in held]
    hm = [x["peak_gib"] for x in held]
    var_p = [p - baseline for p in hp]
    var_m = [m - baseline for m in hm]
    ts_p = [x["predicted_step_s"] for x in held]
    ts_m = [x["step_s"] for x in held]
    summary = {
        "empty_process_gib": baseline,
        "constants": constants.__dict__, "reused": str(args.reuse) if args.reuse else None,
        "held_out": len(held),
        "memory_mape": mape(hp, hm), "memory_largest": largest(hp, hm),
        "memory_variable_mape": mape(var_p, var_m), "memory_variable_largest":
            largest(var_p, var_m),
        "step_mape": mape(ts_p, ts_m), "step_largest": largest(ts_p, ts_m),
        "step_spearman": float(spearmanr(ts_p, ts_m).statistic),
        "model_dependent_over_half": sum(
            1 for x in result_rows if x["peak_gib"] - baseline > 0.5 * x["peak_gib"]),
    }
    print(f"\nheld out ({len(held)} configurations), fitted on the other {len(train)}:")
    print(f"  peak memory: MAPE {100 * summary['memory_mape']:.1f} % (largest "
          f"{100 * summary['memory_largest']:+.1f} %); target <= 10 %")
    print(f"  model-dependent memory (peak - {baseline:.2f} GiB empty process): MAPE "
          f"{100 * summary['memory_variable_mape']:.1f} % (largest "
          f"{100 * summary['memory_variable_largest']:+.1f} %)")
    print(f"  step time: MAPE {100 * summary['step_mape']:.1f} % (largest "
          f"{100 * summary['step_largest']:+.1f} %), Spearman "
          f"{summary['step_spearman']:.3f}; targets <= 15 %, >= 0.9")
    print(f"  configurations whose model-dependent memory is over half the peak: "
          f"{summary['model_dependent_over_half']} of {len(result_rows)}")
    print(load_note([r["load"] for r in runs]))
    print(f"wrote {write_result('cost_model_cpu', {'runs': result_rows, **summary})}")


if __name__ == "__main__":
    cli(main)
