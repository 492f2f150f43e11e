"""``python -m autotune calibrate``'s work: fit a hardware profile's cost model to a CSV of
runs measured elsewhere, say each run's measured, fitted and held-out step time with the
in-sample and leave-one-out errors, refuse a fit out of its plausible range, and store the
fit for the profile. The verb is autotune/commands/calibrate.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from autotune.plan import calibration
from autotune.plan.calibration import Measurement
from autotune.plan.costmodel import CostModel
from autotune.plan.measured_points import read_points
from autotune.plan.plausible import implausible
from autotune.plan.predict import Constants, Prediction
from autotune.presentation.tables import markdown_table
from trials.contract.schema import ConfigError, DType, HardwareConfig
from trials.contract.vocabulary import precision_name


def relative_errors(points: list[Measurement], preds: list[Prediction]) -> dict[str, list]:
    steps = [pr.step_s / p.step_s - 1 for p, pr in zip(points, preds)
             if p.step_s and pr.step_s is not None]
    peaks = [pr.peak_gib / p.peak_gib - 1 for p, pr in zip(points, preds) if p.peak_gib]
    return {"step": steps, "peak": peaks}


def rms(errors: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(errors)))) if errors else 0.0


def mape(errors: list[float]) -> str:
    return f"{100 * float(np.mean(np.abs(errors))):.1f} %" if errors else "-"


def table(points: list[Measurement], fitted: list[Prediction], held: list[Prediction]) -> str:
    rows = []
    for n, (p, f, h) in enumerate(zip(points, fitted, held), start=2):
        j = p.job
        rows.append({"row": n, "model": f"L{p.dims.layers} h{p.dims.hidden}",
                     "split": j.split, "batch": j.global_batch, "m": j.micro_batches,
                     "recompute": j.recompute.value,
                     "precision": precision_name(j.dtype), "step s": p.step_s,
                     "fit s": f.step_s, "held out s": h.step_s,
                     "peak GiB": p.peak_gib, "fit GiB": f.peak_gib if p.peak_gib else None})
    return markdown_table(pd.DataFrame(rows))


def calibrate_csv(path: Path, hw: HardwareConfig, *, store: bool,
                  say: Callable[[str], None]) -> int:
    """Fit ``hw``'s constants to the runs of the CSV at ``path``, ``say`` each line of the
    result, store the fit for the profile when ``store``; the exit code (1: refused)."""
    model = CostModel.for_profile(hw)
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
    fitted = [calibration.predicted(p, constants) for p in points]
    held = calibration.leave_one_out(points, prior, progress=_progress(say, len(points)))
    say(table(points, fitted, held))
    inside, outside = relative_errors(points, fitted), relative_errors(points, held)
    say(f"step time: in-sample {mape(inside['step'])}, leave-one-out "
        f"{mape(outside['step'])} (MAPE over {len(inside['step'])} runs)"
        + (f"; peak memory: in-sample {mape(inside['peak'])}, leave-one-out "
           f"{mape(outside['peak'])} ({len(inside['peak'])} runs)"
           if inside["peak"] else "; no peak memory given: the memory constants "
           "keep the profile's priors"))
    problem = implausible(constants, points)
    if problem:
        say(f"refused, nothing stored: {problem}")
        return 1
    when = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    # The error a run the fit has not seen should expect: what a sweep trusts the fit by
    # (sweep.predict.max_time_error) and every prediction's stated uncertainty.
    constants = dataclasses.replace(
        constants, source=f"calibrate: fit of {len(points)} runs from {path.name} ({when})",
        time_uncertainty=max(constants.time_uncertainty, rms(outside["step"])))
    c = constants
    say("constants: compute efficiency "
        + ", ".join(f"{precision_name(DType(d))} {v:.3f}"
                    for d, v in c.compute_efficiency.items()
                    if d in {p.job.dtype.value for p in points})
        + f"; collective efficiency: tensor-parallel "
          f"{collective(c.mp_collective_efficiency)}, data-parallel "
          f"{collective(c.dp_collective_efficiency)}; "
          f"layer latency {1e3 * c.layer_latency_s:.3g} ms; GEMM floor "
          f"{1e6 * c.kernel_floor_s:.3g} us; step overhead {c.step_overhead_s:.3g} s")
    unmeasured = [precision_name(DType(d)) for d in c.compute_efficiency
                  if d not in c.efficiency_dtypes and hw.peak_tflops.get(d) is not None]
    if unmeasured:
        say(f"not measured by these runs: the {'/'.join(unmeasured)} compute efficiency "
            "keeps the prior (predictions use a measured precision's where the profile's "
            "datasheet peak is the same; plan says which constants are priors)")
    if store:
        stored = calibration.save(hw.name, constants)
        say(f"stored for hardware profile {hw.name}: {stored} (plan uses it, and "
            "a new study starts from it; each names it)")
    else:
        say("not stored (calibrate.store=false)")
    return 0


def collective(efficiency: float) -> str:
    """A fitted collective efficiency; at the fit's bound, what that means."""
    bound = 1.0 / calibration.MIN_COLLECTIVE_FACTOR
    if efficiency >= 0.99 * bound:
        return (f"{efficiency:.3g} (the fit's bound, what the collective library achieves on "
                "the link: these runs show no more cost of it)")
    return f"{efficiency:.3g}"


#: From this many runs the leave-one-out refits take long enough to say how far they got.
PROGRESS_FROM = 100


def _progress(say: Callable[[str], None], total: int) -> Callable[[int, int], None] | None:
    """A line every tenth of the refits, for a CSV of PROGRESS_FROM runs or more."""
    if total < PROGRESS_FROM:
        return None
    step = max(1, total // 10)

    def report(done: int, of: int) -> None:
        if done % step == 0 or done == of:
            say(f"leave-one-out: {done}/{of} refits")
    return report
