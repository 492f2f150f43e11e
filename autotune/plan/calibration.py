"""Fit the cost model's free constants to measured trials (least squares), per hardware
profile and machine, and keep the fit with its residual error.

Both models are linear in their constants once the formulas have done their work:

    measured step - data wait = overhead + sum_dtype (FLOPs / peak) / efficiency_dtype
                                + (collective seconds at full bandwidth) / collective efficiency
    measured peak             = runtime overhead + allocator x (states + buffers)
                                + allocator x activation factor x activations

so a non-negative least-squares fit (scipy.optimize.nnls) recovers them. Constants a
measurement cannot inform (a dtype never run, no collectives) keep their priors. A
measured OOM is a lower bound: when the fit still predicts it under its budget, the
allocator factor rises until it does not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from autotune.plan import memory, steptime
from autotune.plan.layout import Cluster, Job, Recompute
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import Constants
from trials.contract.machine import default_cache_dir, machine_key

GIB = memory.GIB
#: Fewer measured trials than this keep the priors (and their uncertainty).
MIN_POINTS = 3


@dataclass(frozen=True)
class Measurement:
    """One measured trial, as the cost model sees it."""

    dims: ModelDims
    job: Job
    cluster: Cluster
    peak_flops_per_device: float | None
    peak_gib: float | None = None  # measured peak memory of the most loaded rank
    step_s: float | None = None  # measured median step time
    data_wait_s: float = 0.0
    oom_budget_gib: float | None = None  # ran out of memory under this budget


def _time_columns(m: Measurement) -> tuple[dict[str, float], float, float]:
    """The regressors of one trial's step time: FLOP-seconds at peak per dtype, collective
    seconds at full bandwidth, and the seconds no constant scales (latencies, p2p)."""
    def seconds(collective_efficiency: float) -> steptime.TimeBreakdown:
        return steptime.breakdown(m.dims, m.job, m.cluster, peak_flops=m.peak_flops_per_device,
                                  compute_efficiency=1.0,
                                  collective_efficiency=collective_efficiency,
                                  step_overhead_s=0.0)

    bubble = 1 + (m.job.pp - 1) / m.job.micro_batches if m.job.pp > 1 else 1.0
    full, latency_only = seconds(1.0), seconds(1e30)

    def comm(t: steptime.TimeBreakdown) -> float:
        return t.dp_allreduce + t.mp_collectives * bubble

    fixed = comm(latency_only) + full.pp_p2p
    return {m.job.dtype.value: full.compute * bubble}, comm(full) - comm(latency_only), fixed


def fit_time(points: list[Measurement], prior: Constants) -> tuple[dict, float | None]:
    """(constants, relative RMS error) from the trials with a measured step time."""
    usable = [m for m in points if m.step_s and m.peak_flops_per_device]
    if not usable:
        return {}, None
    if len(usable) < MIN_POINTS:
        return _fit_efficiency_only(usable, prior), None
    rows = [_time_columns(m) for m in usable]
    dtypes = sorted({k for compute, _, _ in rows for k in compute})
    has_comm = any(comm > 0 for _, comm, _ in rows)
    names = ["overhead", *dtypes] + (["comm"] if has_comm else [])
    a = np.array([[1.0, *[compute.get(k, 0.0) for k in dtypes]] + ([comm] if has_comm else [])
                  for compute, comm, _ in rows])
    y = np.array([m.step_s - m.data_wait_s - fixed for m, (_, _, fixed) in zip(usable, rows)])
    from scipy.optimize import nnls  # only when fitting: keeps the sweep's start-up short

    # Weight by 1/y: minimise relative, not absolute, error (trials differ 100x in time).
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    fitted = dict(zip(names, coef))
    out = {"step_overhead_s": float(fitted["overhead"]),
           "data_wait_s": float(np.median([m.data_wait_s for m in usable]))}
    efficiency = dict(prior.compute_efficiency)
    for k in dtypes:
        if fitted[k] > 0:
            efficiency[k] = float(min(1.0, 1.0 / fitted[k]))
    out["compute_efficiency"] = efficiency
    if has_comm and fitted["comm"] > 0:
        out["collective_efficiency"] = float(min(1.0, 1.0 / fitted["comm"]))
    predicted = a @ coef
    return out, _relative_rms(predicted, y, len(names))


def _fit_efficiency_only(usable: list[Measurement], prior: Constants) -> dict:
    """Too few trials for every constant: scale each dtype's compute efficiency alone so
    that the other terms at their priors add up to the measured times."""
    efficiency = dict(prior.compute_efficiency)
    sums: dict[str, list[float]] = {}
    for m in usable:
        compute, comm, fixed = _time_columns(m)
        (dtype, flop_s), = compute.items()
        rest = m.step_s - m.data_wait_s - fixed - prior.step_overhead_s \
            - comm / prior.collective_efficiency
        if rest > 0:
            sums.setdefault(dtype, [0.0, 0.0])
            sums[dtype][0] += flop_s
            sums[dtype][1] += rest
    for dtype, (flop_s, rest) in sums.items():
        efficiency[dtype] = float(min(1.0, flop_s / rest))
    return {"compute_efficiency": efficiency}


def _memory_row(m: Measurement, prior: Constants) -> tuple[float, float, float]:
    """One trial's peak regressors: 1, static GiB, dynamic GiB (formula values)."""
    job = m.job if prior.recompute_frees_memory else replace(m.job, recompute=Recompute.none)
    b = memory.breakdown(m.dims, job, runtime_overhead_gib=0.0, allocator_factor=1.0,
                         activation_factor=1.0)
    return 1.0, b.static / GIB, b.dynamic / GIB


def fit_memory(points: list[Measurement], prior: Constants) -> tuple[dict, float | None]:
    """peak = overhead + allocator x (static + activation factor of the dtype x dynamic):
    one dynamic column per dtype, because a backend may keep extra copies of low-precision
    activations (MindSpore's CPU backend does: docs/mindspore-cpu.md)."""
    usable = [m for m in points if m.peak_gib]
    if not usable:
        return {}, None
    rows = [_memory_row(m, prior) for m in usable]
    dtypes = [m.job.dtype.value for m in usable]
    if len(usable) < MIN_POINTS:
        # Too few trials for every constant: scale the allocator factor alone so that
        # the priors' runtime overhead plus the scaled model meets the measured peaks.
        variable = sum(r[1] + prior.activation_factor[d] * r[2] for r, d in zip(rows, dtypes))
        measured = sum(m.peak_gib - prior.runtime_overhead_gib for m in usable)
        if variable <= 0 or measured <= 0:
            return {}, None
        return {"allocator_factor": max(1e-6, measured / variable)}, None
    from scipy.optimize import nnls

    seen = sorted(set(dtypes))
    a = np.array([[one, static, *[dyn if d == k else 0.0 for k in seen]]
                  for (one, static, dyn), d in zip(rows, dtypes)])
    y = np.array([m.peak_gib for m in usable])
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    overhead, allocator = float(coef[0]), float(coef[1])
    if allocator <= 0:  # the states never varied: keep the prior's split of the slope
        allocator = prior.allocator_factor
    factors = dict(prior.activation_factor)
    for k, value in zip(seen, coef[2:]):
        if value > 0:
            factors[k] = float(value) / allocator
    out = {"runtime_overhead_gib": overhead, "allocator_factor": max(allocator, 1e-6),
           "activation_factor": factors}
    return out, _relative_rms(a @ coef, y, 2 + len(seen))


def _relative_rms(predicted: np.ndarray, measured: np.ndarray, n_params: int) -> float:
    rel = (predicted - measured) / measured
    dof = max(1, len(measured) - n_params)
    return float(math.sqrt(float(np.sum(rel**2)) / dof))


def respect_ooms(constants: Constants, points: list[Measurement]) -> Constants:
    """Raise the allocator factor until every measured OOM is predicted over its budget."""
    factor = constants.allocator_factor
    for m in points:
        if m.oom_budget_gib is None:
            continue
        job = m.job if constants.recompute_frees_memory else replace(m.job,
                                                                     recompute=Recompute.none)
        b = memory.breakdown(m.dims, job, runtime_overhead_gib=constants.runtime_overhead_gib,
                             allocator_factor=factor,
                             activation_factor=constants.activation_factor[
                                 m.job.dtype.value])
        variable = b.peak_gib - constants.runtime_overhead_gib
        needed = m.oom_budget_gib - constants.runtime_overhead_gib
        if variable > 0 and needed > variable:
            factor *= needed / variable * 1.001
    return replace(constants, allocator_factor=factor)


def fit(points: list[Measurement], prior: Constants) -> Constants:
    """The constants these measurements support, with their uncertainty."""
    time_fit, time_error = fit_time(points, prior)
    memory_fit, memory_error = fit_memory(points, prior)
    constants = replace(prior, **time_fit, **memory_fit)
    if time_error is not None:
        constants = replace(constants, time_uncertainty=time_error)
    if memory_error is not None:
        constants = replace(constants, memory_uncertainty=memory_error)
    n = sum(1 for m in points if m.step_s or m.peak_gib)
    if time_fit or memory_fit:
        constants = replace(constants, source=f"fit of {n} measured trial(s)")
    return respect_ooms(constants, points)


# -- storage ---------------------------------------------------------------------------

def calibration_path(profile: str, cache_dir: Path | None = None) -> Path:
    """One file per hardware profile and machine."""
    machine = hashlib.sha256(machine_key().encode()).hexdigest()[:12]
    return (cache_dir or default_cache_dir()) / "calibration" / f"{profile}-{machine}.json"


def load(profile: str, prior: Constants, cache_dir: Path | None = None) -> Constants:
    """The stored fit for this profile and machine, else the priors."""
    try:
        data = json.loads(calibration_path(profile, cache_dir).read_text())
        stored = replace(prior, **data["constants"])
    except (OSError, ValueError, KeyError, TypeError):
        return prior
    # A file from another version of the model (other fields, other shapes) is ignored.
    shapes_match = all(isinstance(getattr(stored, f.name), type(getattr(prior, f.name)))
                       for f in dataclasses.fields(prior))
    return stored if shapes_match else prior


def save(profile: str, constants: Constants, cache_dir: Path | None = None) -> Path:
    path = calibration_path(profile, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{time.time_ns()}.tmp")
    tmp.write_text(json.dumps({"machine": machine_key(), "profile": profile,
                               "fitted_at": time.time(), "constants": asdict(constants)},
                              indent=1))
    tmp.replace(path)
    return path
