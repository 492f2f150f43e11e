"""``python -m autotune calibrate``: fit the cost model to runs measured elsewhere.

    python -m autotune calibrate calibrate.csv=my_runs.csv hardware=gpu_a100
    python -m autotune calibrate calibrate.csv=examples/calibrate/vtrain_a100.csv \\
        hardware=gpu_a100 calibrate.store=false     # the errors only, nothing stored

Reads a CSV of measured runs (your own, or a published table; the columns:
autotune/plan/measured_points.py), fits the constants of the hardware profile's cost model
by the same least squares a sweep uses (autotune/plan/calibration.py), prints each run's
measured and predicted step time (and peak memory where given), the in-sample error and the
leave-one-out error (each run predicted by a fit of the others: the error to expect on a run
the fit has not seen), and stores the fit for the hardware profile, not for this machine:
the runs were measured elsewhere. ``plan`` uses it and names it ("calibrate: fit of N runs
from FILE"); a new study starts from it (a study's own refits then belong to that study).

A fit whose constants leave their plausible range (autotune/plan/plausible.py: a compute
efficiency under 2 % of the peak, a fixed cost longer than the runs' steps, an allocator
factor over 4, an activation factor over 16) is refused with
the reason, exit 1, nothing stored: the model's terms do not describe those runs, and a fit
that bends its constants that far would mislead every plan. A bad row is one line naming the
row and the column, exit 2.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.plan import calibration
from autotune.plan.calibration import Measurement
from autotune.plan.costmodel import CostModel
from autotune.plan.measured_points import read_points
from autotune.plan.plausible import implausible
from autotune.plan.predict import Constants, Prediction, predict
from autotune.presentation.tables import markdown_table
from autotune.settings import CalibrateSettings
from trials.contract.schema import ConfigError, DType, to_trial_config
from trials.contract.vocabulary import precision_name


def predicted(point: Measurement, constants: Constants) -> Prediction:
    return predict(point.dims, point.job, point.cluster, constants,
                   peak_flops_per_device=point.peak_flops_per_device)


def relative_errors(points: list[Measurement], preds: list[Prediction]) -> dict[str, list]:
    steps = [pr.step_s / p.step_s - 1 for p, pr in zip(points, preds)
             if p.step_s and pr.step_s is not None]
    peaks = [pr.peak_gib / p.peak_gib - 1 for p, pr in zip(points, preds) if p.peak_gib]
    return {"step": steps, "peak": peaks}


def leave_one_out(points: list[Measurement], prior: Constants) -> list[Prediction]:
    """Each run predicted by the fit of every other run."""
    return [predicted(p, calibration.fit(points[:i] + points[i + 1:], prior))
            for i, p in enumerate(points)]


def rms(errors: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(errors)))) if errors else 0.0


def mape(errors: list[float]) -> str:
    return f"{100 * float(np.mean(np.abs(errors))):.1f} %" if errors else "-"


def table(points: list[Measurement], fitted: list[Prediction], held: list[Prediction]) -> str:
    rows = []
    for n, (p, f, h) in enumerate(zip(points, fitted, held), start=2):
        j = p.job
        rows.append({"row": n, "model": f"L{p.dims.layers} h{p.dims.hidden}",
                     "split": j.split, "m": j.micro_batches,
                     "precision": precision_name(j.dtype), "step s": p.step_s,
                     "fit s": f.step_s, "held out s": h.step_s,
                     "peak GiB": p.peak_gib, "fit GiB": f.peak_gib if p.peak_gib else None})
    return markdown_table(pd.DataFrame(rows))


def run_calibrate(composed: DictConfig, console: Console) -> int:
    options: CalibrateSettings = OmegaConf.to_object(composed.calibrate)
    if not options.csv:
        raise ConfigError("calibrate needs calibrate.csv=PATH: a CSV of measured runs, one per "
                          "row (the columns: python -m autotune calibrate --help, or README "
                          "\"Planning before launch\")")
    hw = to_trial_config(composed).hardware
    model = CostModel.for_profile(hw)
    path = Path(options.csv)
    points = read_points(path, hw, model.peak_flops_per_device)
    no_peak = sorted({precision_name(p.job.dtype) for p in points
                      if p.peak_flops_per_device is None})
    if no_peak:
        raise ConfigError(f"hardware={hw.name} has no peak FLOP/s for {', '.join(no_peak)}: "
                          "choose the profile the runs were measured on (hardware=...), or "
                          "add its peak_tflops")
    if len(points) < calibration.MIN_POINTS:
        raise ConfigError(f"{path} has {len(points)} run(s): a fit needs at least "
                          f"{calibration.MIN_POINTS}")
    prior = Constants.priors(hw)
    constants = calibration.fit(points, prior)
    fitted = [predicted(p, constants) for p in points]
    held = leave_one_out(points, prior)
    console.print(table(points, fitted, held), markup=False, soft_wrap=True)
    inside, outside = relative_errors(points, fitted), relative_errors(points, held)
    console.print(f"step time: in-sample {mape(inside['step'])}, leave-one-out "
                  f"{mape(outside['step'])} (MAPE over {len(inside['step'])} runs)"
                  + (f"; peak memory: in-sample {mape(inside['peak'])}, leave-one-out "
                     f"{mape(outside['peak'])} ({len(inside['peak'])} runs)"
                     if inside["peak"] else "; no peak memory given: the memory constants "
                     "keep the profile's priors"), markup=False)
    problem = implausible(constants, points)
    if problem:
        console.print(f"refused, nothing stored: {problem}", markup=False, soft_wrap=True)
        return 1
    when = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    # The error a run the fit has not seen should expect: what a sweep trusts the fit by
    # (sweep.predict.max_time_error) and every prediction's stated uncertainty.
    constants = dataclasses.replace(
        constants, source=f"calibrate: fit of {len(points)} runs from {path.name} ({when})",
        time_uncertainty=max(constants.time_uncertainty, rms(outside["step"])))
    c = constants
    console.print("constants: compute efficiency "
                  + ", ".join(f"{precision_name(DType(d))} {v:.3f}"
                              for d, v in c.compute_efficiency.items()
                              if d in {p.job.dtype.value for p in points})
                  + f"; collective efficiency: tensor-parallel "
                    f"{collective(c.mp_collective_efficiency)}, data-parallel "
                    f"{collective(c.dp_collective_efficiency)}; "
                    f"layer latency {1e3 * c.layer_latency_s:.3g} ms; step overhead "
                    f"{c.step_overhead_s:.3g} s", markup=False, soft_wrap=True)
    if c.shape_efficiency:
        # Shapes with 8 or more runs have their own efficiency (steptime.gemm_shape).
        console.print("compute efficiency by GEMM shape (tokens x hidden / mp): "
                      + ", ".join(f"{k.split(':', 1)[1]} {v:.3f}"
                                  for k, v in sorted(c.shape_efficiency.items())),
                      markup=False, soft_wrap=True)
    if options.store:
        stored = calibration.save(hw.name, constants)
        console.print(f"stored for hardware profile {hw.name}: {stored} (plan uses it, and "
                      "a new study starts from it; each names it)", markup=False,
                      soft_wrap=True)
    else:
        console.print("not stored (calibrate.store=false)", markup=False)
    return 0


def collective(efficiency: float) -> str:
    """A fitted collective efficiency; at the fit's bound, what that means."""
    bound = 1.0 / calibration.MIN_COLLECTIVE_FACTOR
    if efficiency >= 0.99 * bound:
        return (f"{efficiency:.3g} (the fit's bound: these runs show no cost of it, as when "
                "the framework hides it behind compute)")
    return f"{efficiency:.3g}"


def run(composed: DictConfig, overrides: list[str], console: Console) -> int:
    return run_calibrate(composed, console)
