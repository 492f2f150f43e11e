"""Fit the cost model's free constants to measured trials (least squares), and keep the
fit with its residual error: a sweep's in its study, ``calibrate``'s per hardware profile.

Both models are linear in their constants once the formulas have done their work:

    measured step - data wait = overhead + sum_dtype (FLOPs / peak) / efficiency_dtype
                                + layer latency x layers x micro-batches
                                + (TP collective seconds at full bandwidth) / TP efficiency
                                + (DP all-reduce seconds at full bandwidth) / DP efficiency
    measured peak             = runtime overhead + allocator x (states + buffers)
                                + allocator x activation factor x activations

so a least-squares fit recovers them: bounded for step time (scipy.optimize.lsq_linear:
compute efficiency <= 1, seconds >= 0), non-negative for memory (scipy.optimize.nnls).
Constants a measurement cannot inform (a dtype never run, no collectives, a column the
others already explain) keep their priors. A
measured OOM is a lower bound: when the fit still predicts it under its budget, the
allocator factor rises until it does not.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from autotune.plan import memory, steptime
from autotune.plan.layout import Cluster, Job, Recompute, host_contention
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import Constants, Prediction, predict
from autotune.study.schema.fit import FitRecord
from trials.contract.machine import default_cache_dir
from trials.contract.schema import Mode

GIB = memory.GIB
#: Fewer measured trials than this keep the priors (and their uncertainty).
MIN_POINTS = 3
#: Collectives are charged at no more than what their library achieves on their links
#: (``LinkConfig.achieved_gbs``, an efficiency of at most 1): single-node runs whose
#: collectives a fit cannot see would otherwise make them free (fitted on vTrain's
#: single-node runs, the data-parallel efficiency sat at a bound of 100 and ZeRO-3 runs on
#: 384-2,240 GPUs came out 41-82 % fast). Overlap with compute is modelled where it
#: happens (steptime.exposed_reduction_s), not fitted into the bandwidth.
MIN_COLLECTIVE_FACTOR = 1.0


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


def _time_columns(m: Measurement, floor_s: float = 0.0,
                  efficiency: float = 1.0) -> tuple[dict[str, float], float]:
    """The regressors of one trial's step time: the seconds each time constant's coefficient
    multiplies (FLOP-seconds at peak for the dtype's 1 / compute efficiency, collective
    seconds at full bandwidth for 1 / efficiency, layer-micro-batches for the layer
    latency, 1 for the step overhead), and the seconds no constant scales (latencies, p2p,
    the memory-bound kernels at the memory bandwidth's roofline, the floors of the GEMMs
    shorter than ``floor_s`` at ``efficiency``). An overlapped data-parallel
    reduction enters as its exposed part at full bandwidth (the overlap is not linear in
    the efficiency; the fit treats it as if it were)."""
    return _with_compute(m, _other_columns(m), floor_s, efficiency)


def _other_columns(m: Measurement) -> tuple[dict[str, float], float]:
    """The columns and fixed seconds of every term but the GEMMs' (the same at any floor)."""
    def seconds(collective_efficiency: float) -> steptime.TimeBreakdown:
        return steptime.breakdown(m.dims, m.job, m.cluster, peak_flops=m.peak_flops_per_device,
                                  compute_efficiency=1.0,
                                  mp_collective_efficiency=collective_efficiency,
                                  dp_collective_efficiency=collective_efficiency,
                                  layer_latency_s=1.0, step_overhead_s=0.0)

    bubble = 1 / (1 - steptime.bubble_fraction(m.job))
    full, latency_only = seconds(1.0), seconds(1e30)
    tensor = full.mp_collectives + full.cp_collectives
    tensor_latency = latency_only.mp_collectives + latency_only.cp_collectives
    mode = m.job.mode.value
    columns = {f"overhead:{mode}": host_contention(m.job, m.cluster),
               "mp": (tensor - tensor_latency) * bubble,
               "dp": full.dp_allreduce - latency_only.dp_allreduce,
               f"layer:{mode}": full.layer_latency * bubble}
    # Memory-bound work is its bytes over the datasheet's bandwidth: no constant scales it.
    fixed = ((tensor_latency + full.memory_bound) * bubble + latency_only.dp_allreduce
             + full.pp_p2p)
    return columns, fixed


def _with_compute(m: Measurement, other: tuple[dict[str, float], float], floor_s: float,
                  efficiency: float) -> tuple[dict[str, float], float]:
    """``other`` with the GEMMs' column (those above the floor) and their floors (fixed)."""
    bubble = 1 / (1 - steptime.bubble_fraction(m.job))
    above, floored, _, _ = steptime.compute_parts(m.dims, m.job, m.cluster,
                                                  m.peak_flops_per_device, efficiency, floor_s)
    columns, fixed = other
    return ({**columns, f"compute:{m.job.dtype.value}": above * bubble},
            fixed + floored * bubble)


def time_terms(m: Measurement) -> set[str]:
    """The time constants a prediction of this trial rests on: its columns that are not 0
    (``compute:float16``, ``overhead:pynative``, ``dp``, ...); none without a peak FLOP/s
    (no time is predicted)."""
    if not m.peak_flops_per_device:
        return set()
    return {k for k, v in _time_columns(m)[0].items() if v > 0}


def _time_prior(name: str, prior: Constants, ceiling: float = 1.0) -> tuple[float, float]:
    """(the prior's coefficient of a column, the lower bound of the fit): compute cannot
    beat the device's measured GEMM ceiling (efficiency <= ``ceiling``, the profile's
    ``cost.compute_ceiling``: a fit on small models would otherwise trade a near-perfect
    GEMM efficiency for a large per-layer latency, and plan large models fast); a
    collective cannot beat its library's benchmark on its link (efficiency at most
    1 / MIN_COLLECTIVE_FACTOR); the seconds are non-negative."""
    kind, _, which = name.partition(":")
    if kind == "compute":  # which: a dtype
        return 1.0 / min(prior.compute_efficiency[which], ceiling), 1.0 / ceiling
    if kind == "overhead":
        return prior.step_overhead(Mode(which)), 0.0
    if kind == "layer":
        return prior.layer_latency(Mode(which)), 0.0
    return {"mp": (1.0 / prior.mp_collective_efficiency, MIN_COLLECTIVE_FACTOR),
            "dp": (1.0 / prior.dp_collective_efficiency, MIN_COLLECTIVE_FACTOR)}[name]


def _identifiable(a: np.ndarray, n_points: int) -> list[int]:
    """The columns, in order, that each add information (raise the rank of the scaled
    design), at most one per measured point: the others keep their priors."""
    scale = np.linalg.norm(a, axis=0)
    keep: list[int] = []
    for j in range(a.shape[1]):
        if scale[j] == 0 or len(keep) >= n_points:
            continue
        trial = a[:, [*keep, j]] / scale[[*keep, j]]
        if np.linalg.matrix_rank(trial, tol=1e-9) > len(keep):
            keep.append(j)
    return keep


#: The GEMM floors a fit chooses among (steptime.compute_parts; Constants.kernel_floor_s):
#: seconds, from none to the ~100 us a host-bound framework takes per op.
KERNEL_FLOORS_S = (0.0, 5e-6, 10e-6, 20e-6, 30e-6, 50e-6, 75e-6, 100e-6, 150e-6)
#: A floor is fitted only from this many measured runs: it trades against the per-layer
#: latency and the compute efficiency, and only many GEMM shapes separate the three
#: (calibrate's CSV of a landscape, not a sweep's few trials).
FLOOR_MIN_POINTS = 20


def fit_time(points: list[Measurement], prior: Constants) -> tuple[dict, float | None]:
    """(constants, relative RMS error) from the trials with a measured step time.

    One bounded least-squares fit (scipy.optimize.lsq_linear) of every identifiable
    constant at once, bounds inside the fit (no clipping afterwards, which would leave
    the other constants fitted to a value that is not used). The GEMM floor is not linear
    in the rest: with enough runs each floor of KERNEL_FLOORS_S is fitted in turn (which
    GEMMs fall under it read at the prior's efficiency, then at the fitted one) and the
    floor of the smallest relative error is kept."""
    usable = [m for m in points if m.step_s and m.peak_flops_per_device]
    if not usable:
        return {}, None
    if len(usable) < MIN_POINTS:
        return _fit_efficiency_only(usable, prior, compute_ceiling(usable)), None
    floors = KERNEL_FLOORS_S if len(usable) >= FLOOR_MIN_POINTS else (prior.kernel_floor_s,)
    ceiling = compute_ceiling(usable)
    others = [_other_columns(m) for m in usable]
    best: tuple[dict, float] | None = None
    for floor in floors:
        efficiency = {d: min(e, ceiling) for d, e in prior.compute_efficiency.items()}
        # Which GEMMs are under the floor depends on the efficiency (none at a floor of 0).
        for _ in range(2 if floor else 1):
            rows = [_with_compute(m, other, floor, efficiency[m.job.dtype.value])
                    for m, other in zip(usable, others)]
            out, error = _fit_time_at(usable, rows, prior, ceiling,
                                      extra_params=int(len(floors) > 1))
            efficiency = {d: min(e, ceiling) for d, e in out["compute_efficiency"].items()}
        if best is None or error < best[1]:
            best = ({**out, "kernel_floor_s": floor}, error)
    return best


def _fit_time_at(usable: list[Measurement], rows: list[tuple[dict[str, float], float]],
                 prior: Constants, ceiling: float, extra_params: int) -> tuple[dict, float]:
    """fit_time's linear fit of the points' ``rows`` (_time_columns at one GEMM floor)."""
    dtypes = sorted({k for columns, _ in rows for k in columns if k.startswith("compute:")})
    modes = sorted({m.job.mode.value for m in usable})
    names = [*(f"overhead:{x}" for x in modes), *dtypes, "mp", "dp",
             *(f"layer:{x}" for x in modes)]
    a = np.array([[columns.get(k, 0.0) for k in names] for columns, _ in rows])
    y = np.array([m.step_s - m.data_wait_s - fixed for m, (_, fixed) in zip(usable, rows)])
    priors = np.array([_time_prior(k, prior, ceiling)[0] for k in names])
    lower = np.array([_time_prior(k, prior, ceiling)[1] for k in names])
    free = _identifiable(a / y[:, None], len(usable))
    held = [j for j in range(len(names)) if j not in free]
    from scipy.optimize import lsq_linear  # only when fitting: keeps start-up short

    # Weight by 1/y: minimise relative, not absolute, error (trials differ 100x in time).
    target = y - a[:, held] @ priors[held]
    coef = priors.copy()
    coef[free] = lsq_linear(a[:, free] / y[:, None], target / y, method="bvls",
                            bounds=(lower[free], np.inf)).x
    fitted = {names[j]: float(coef[j]) for j in free}
    out: dict = {"data_wait_s": float(np.median([m.data_wait_s for m in usable]))}
    for mode in modes:
        prefix = "pynative_" if mode == Mode.pynative.value else ""
        if f"overhead:{mode}" in fitted:
            out[f"{prefix}step_overhead_s"] = fitted[f"overhead:{mode}"]
        if f"layer:{mode}" in fitted:
            out[f"{prefix}layer_latency_s"] = fitted[f"layer:{mode}"]
    for k in ("mp", "dp"):
        if k in fitted:
            out[f"{k}_collective_efficiency"] = 1.0 / fitted[k]
    fitted_efficiency = dict(prior.compute_efficiency)
    for j in free:
        kind, _, dtype = names[j].partition(":")
        if kind == "compute":
            fitted_efficiency[dtype] = 1.0 / float(coef[j])
    out["compute_efficiency"] = fitted_efficiency
    out["efficiency_dtypes"] = sorted({names[j].split(":")[1] for j in free
                                       if names[j].startswith("compute:")})
    # The fixed seconds are part of the prediction: the error is of the whole step.
    fixed = np.array([f for _, f in rows])
    total = a @ coef + fixed + np.array([m.data_wait_s for m in usable])
    measured = np.array([m.step_s for m in usable])
    return out, _relative_rms(total, measured, len(free) + extra_params)


def compute_ceiling(points: list[Measurement]) -> float:
    """The lowest measured GEMM ceiling of the devices the points ran on (1.0: none known)."""
    return min((m.cluster.hardware.cost.compute_ceiling for m in points), default=1.0)


def _fit_efficiency_only(usable: list[Measurement], prior: Constants,
                         ceiling: float) -> dict:
    """Too few trials for every constant: one constant per trial absorbs what the others,
    at their priors, leave unexplained. For a PyNative trial that is its per-layer host
    latency while that prior is 0, a placeholder (every op is dispatched from Python, a
    cost no profile measures); else the dtype's compute efficiency (at most the device's
    ceiling), whose prior a GEMM benchmark or a datasheet sets. Charging a PyNative
    baseline's host cost to the GEMMs instead made graph mode look as slow as PyNative
    until a third trial was measured, and the model's first picks were PyNative points
    (BENCHMARKS.md "Search efficiency")."""
    efficiency = dict(prior.compute_efficiency)
    sums: dict[str, list[float]] = {}
    for m in usable:
        columns, fixed = _time_columns(m, prior.kernel_floor_s,
                                       prior.efficiency(m.job.dtype.value, m.cluster.hardware))
        layer = f"layer:{m.job.mode.value}"
        placeholder = (m.job.mode is Mode.pynative and columns.get(layer, 0.0) > 0
                       and _time_prior(layer, prior)[0] == 0)
        key = layer if placeholder else f"compute:{m.job.dtype.value}"
        rest = m.step_s - m.data_wait_s - fixed - sum(
            _time_prior(k, prior)[0] * v for k, v in columns.items() if k != key)
        if rest > 0:
            sums.setdefault(key, [0.0, 0.0])
            sums[key][0] += columns[key]
            sums[key][1] += rest
    out: dict = {}
    for key, (units, rest) in sums.items():
        kind, _, which = key.partition(":")
        if kind == "compute":  # units: FLOP-seconds at peak
            efficiency[which] = float(min(ceiling, units / rest))
        else:  # units: layer-micro-batches
            out["pynative_layer_latency_s"] = rest / units
    return {**out, "compute_efficiency": efficiency,
            "efficiency_dtypes": sorted(k.partition(":")[2] for k in sums
                                        if k.startswith("compute:"))}


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
        peaks = sum(m.peak_gib for m in usable)
        measured = peaks - len(usable) * prior.runtime_overhead_gib
        if variable <= 0:
            return {}, None
        if measured <= 0:
            # The priors' runtime overhead alone is over the measured peaks: the overhead is
            # what is wrong. Keep the priors' allocator factor and lower the overhead to
            # what the peaks leave (to zero, the factor scaled, if they leave nothing).
            scaled = prior.allocator_factor * variable
            if scaled < peaks:
                return {"runtime_overhead_gib": (peaks - scaled) / len(usable)}, None
            return {"runtime_overhead_gib": 0.0,
                    "allocator_factor": max(1e-6, peaks / variable)}, None
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
           "activation_factor": factors,
           "activation_dtypes": sorted(k for k, v in zip(seen, coef[2:]) if v > 0)}
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
    # What the start (an imported fit) measured stays measured.
    constants = replace(constants, **{
        k: sorted(set(getattr(prior, k)) | set(getattr(constants, k)))
        for k in ("efficiency_dtypes", "activation_dtypes")})
    if time_error is not None:
        constants = replace(constants, time_uncertainty=time_error)
    if memory_error is not None:
        constants = replace(constants, memory_uncertainty=memory_error)
    n = sum(1 for m in points if m.step_s or m.peak_gib)
    if time_fit or memory_fit:
        constants = replace(constants, source=f"fit of {n} measured trial(s)")
    return respect_ooms(constants, points)


def predicted(point: Measurement, constants: Constants) -> Prediction:
    """The model's prediction of a measured point under ``constants``."""
    return predict(point.dims, point.job, point.cluster, constants,
                   peak_flops_per_device=point.peak_flops_per_device)


def leave_one_out(points: list[Measurement], start: Constants,
                  progress: Callable[[int, int], None] | None = None) -> list[Prediction]:
    """Each point predicted by the fit (from ``start``) of every other point: what a run the
    fit has not seen should expect. ``calibrate``'s held-out error and the sweep's held-out
    ranking (learning.held_out_rank) both come from here. ``progress(done, total)`` is
    called after each refit (there are as many as points, each over all the others)."""
    held = []
    for i, p in enumerate(points):
        held.append(predicted(p, fit(points[:i] + points[i + 1:], start)))
        if progress is not None:
            progress(i + 1, len(points))
    return held


# -- storage ---------------------------------------------------------------------------
# Where a fit is stored decides who may use it. A sweep's refits belong to its study (one
# workload x hardware profile) and are stored in the study (autotune/plan/fits.py); a fit
# ``calibrate`` imported from runs measured elsewhere belongs to the hardware profile and
# is the file below. Both keep the same record (to_record / from_record). No fit is kept
# per machine: a machine runs many studies, and one study's fit misled the next one's
# predictions (issue 21: a peak of 2.66 GiB predicted for a trial that measured 0.91).

def imported_path(profile: str, cache_dir: Path | None = None) -> Path:
    """One file per hardware profile: a fit of runs measured elsewhere (``python -m
    autotune calibrate``), which no machine or study owns."""
    return (cache_dir or default_cache_dir()) / "calibration" / f"{profile}-imported.json"


def to_record(constants: Constants, profile: str) -> dict:
    """A fit as JSON-ready data: its constants, its profile, when it was fitted."""
    return FitRecord(profile=profile, fitted_at=time.time(),
                     constants=asdict(constants)).to_json()


def from_record(data: object, prior: Constants, profile: str) -> Constants | None:
    """The constants of a stored record, or None: not a record, another profile's, or from
    another version of the model (other fields, other shapes)."""
    if not isinstance(data, dict):
        return None
    try:
        record = FitRecord.from_json(data)
        if record.profile != profile or record.constants is None:
            return None
        constants = dict(record.constants)
        # A fit stored before the roofline compute term (issue 33) names its per-shape
        # efficiencies; without any, its constants mean what they mean today.
        if constants.pop("shape_efficiency", {}):
            return None
        stored = replace(prior, **constants)
    except TypeError:  # another model version's fields
        return None
    shapes_match = all(isinstance(getattr(stored, f.name), type(getattr(prior, f.name)))
                       for f in dataclasses.fields(prior))
    return stored if shapes_match else None


def load(profile: str, prior: Constants, cache_dir: Path | None = None) -> Constants:
    """The fit ``calibrate`` imported for this profile, else the priors: what a study
    without a fit of its own starts from. Its ``source`` says which it is."""
    try:
        data = json.loads(imported_path(profile, cache_dir).read_text())
    except (OSError, ValueError):
        return prior
    return from_record(data, prior, profile) or prior


def save(profile: str, constants: Constants, cache_dir: Path | None = None) -> Path:
    """Store the fit of runs measured elsewhere (``calibrate``) for the hardware profile."""
    path = imported_path(profile, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{time.time_ns()}.tmp")
    tmp.write_text(json.dumps(to_record(constants, profile), indent=1))
    tmp.replace(path)
    return path
