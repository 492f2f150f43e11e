"""The cost model of whichever checkout imports this file, driven by JSON: points in,
predictions out. bench/cost_model_heldout.py calls :func:`run` in-process for this
checkout's model and runs this file in a subprocess of an old revision's worktree for the
old one, so both models see exactly the same points and folds.

    PYTHONPATH=<old worktree> python -P bench/cost_model_adapter.py < request.json

It imports only names every revision since 26a4878 has (``autotune.plan`` predict,
calibration.fit, Job, Cluster, ModelDims; the ``sweep`` config's hardware profiles), and
nothing from ``bench`` (the old worktree's ``bench`` is not this one).

Request: ``{"points": [{"dims": {...}, "job": {...}, "hardware": "gpu_a100",
"hardware_overrides": ["hardware.inter_node.bandwidth_gbs=6.25"] (optional), "nodes": 1,
"step_s": 1.2, "peak_gib": 60.0 | null}], "tasks": [{"prior": "gpu_a100", "fit_on": [0, 1] |
null, "predict": [2], "fit_peaks": false}]}``: a task fits on the points' step times, or,
with ``fit_peaks``, on their peaks alone. A job is the settings of a run (``Job``'s
fields plus the ones a revision may lack: ``shard_level``, ``virtual_stages``,
``context_parallel``, ``flash_attention``, ...); each point is built with the fields
this checkout's ``Job`` has (:func:`job_of`), and the settings it could not represent are
returned per point.
Response: ``{"unrepresented": [[...] per point], "tasks": [{"source": ..., "constants":
{...}, "step_s": [...], "peak_gib": [...]}]}``.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, fields

from autotune.plan import calibration
from autotune.plan.calibration import Measurement
from autotune.plan.layout import Cluster, Job, Recompute
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import Constants, predict
from autotune.settings import SweepConfig
from trials.contract.compose import compose
from trials.contract.schema import Arch, DType, Mode, to_trial_config

#: Settings a revision's Job may lack, at the value that means "not used".
NEUTRAL = {"shard_level": 0, "virtual_stages": 1, "context_parallel": 1,
           "flash_attention": False, "fp32_main_grads": False, "keeps_16bit_grads": False,
           "unfused_cross_entropy": False, "stage_layers": None, "mode": "graph",
           "threads": 0, "reduce_in_fp32": True, "overlap_grad_reduce": False}

_profiles: dict = {}


def profile(name: str, overrides: tuple[str, ...] = ()):
    """A hardware profile of this checkout's conf/hardware (its own priors), with the
    Hydra ``overrides`` of a run whose cluster differs from it (``plan`` takes the same:
    ``hardware.inter_node.bandwidth_gbs=6.25``)."""
    key = (name, tuple(overrides))
    if key not in _profiles:
        _profiles[key] = to_trial_config(
            compose("sweep", [f"hardware={name}", *overrides], schema=SweepConfig)).hardware
    return _profiles[key]


def job_of(settings: dict) -> tuple[Job, list[str]]:
    """This checkout's Job of a run's settings, and the settings it cannot represent.

    The sharding level (0 none, 1 optimizer states, 2 + gradients, 3 + parameters) goes
    to ``shard_level`` where the Job has it, else to the bool ``optimizer_shard`` (level
    1); any other setting the Job lacks is dropped and named unless it is neutral."""
    known = {f.name for f in fields(Job)}
    given = dict(settings)
    given["dtype"] = DType(given["dtype"])
    mode = given.get("recompute", "none")
    lost = []
    if mode not in Recompute.__members__:  # a mode this revision lacks: its nearest
        lost.append(f"recompute={mode} (as selective)")
        mode = "selective"
    given["recompute"] = Recompute(mode)
    if "mode" in given and "mode" in known:  # JSON gives the word; the Job keeps the enum
        given["mode"] = Mode(given["mode"])
    if given.get("stage_layers") is not None:  # JSON gives a list; the Job keeps a tuple
        given["stage_layers"] = tuple(given["stage_layers"])
    level = max(int(given.pop("shard_level", 0)), int(bool(given.pop("optimizer_shard", 0))))
    if "shard_level" in known:
        given["shard_level"] = level
    elif level:
        given["optimizer_shard"] = True
        if level > 1:
            lost.append(f"shard_level={level} (as optimizer_shard, level 1)")
    for key in sorted(set(given) - known):
        value = given.pop(key)
        if value != NEUTRAL.get(key):
            lost.append(f"{key}={value}")
    return Job(**given), lost


def settings_of(job: Job) -> dict:
    """A Job as JSON-ready settings (enums by value), the inverse of :func:`job_of`."""
    return {k: getattr(v, "value", v) for k, v in asdict(job).items()}


def dims_of(d: dict) -> ModelDims:
    return ModelDims(**{**d, "arch": Arch(d["arch"])})


def peak_flops(hw, dtype: DType) -> float | None:
    value = hw.peak_tflops.get(dtype.value)
    return float(value) * 1e12 if value else None


def run(request: dict) -> dict:
    """Predict every task's points, with the prior's constants or a fit on ``fit_on``."""
    built = []
    unrepresented = []
    for p in request["points"]:
        job, lost = job_of(p["job"])
        hw = profile(p["hardware"], tuple(p.get("hardware_overrides") or ()))
        built.append((dims_of(p["dims"]), job, Cluster(hw, int(p["nodes"])),
                      peak_flops(hw, job.dtype), p.get("step_s"), p.get("peak_gib")))
        unrepresented.append(lost)
    out = []
    for task in request["tasks"]:
        constants = Constants.priors(profile(task["prior"]))
        if task.get("fit_on") is not None:
            # A memory task fits the memory constants to the published peaks alone.
            peaks = bool(task.get("fit_peaks"))
            train = [Measurement(dims=d, job=j, cluster=c, peak_flops_per_device=f,
                                 step_s=None if peaks else s, peak_gib=m if peaks else None)
                     for d, j, c, f, s, m in (built[i] for i in task["fit_on"])]
            constants = calibration.fit(train, constants)
        preds = [predict(d, j, c, constants, peak_flops_per_device=f)
                 for d, j, c, f, _, _ in (built[i] for i in task["predict"])]
        out.append({"source": constants.source, "constants": _jsonable(asdict(constants)),
                    "step_s": [q.step_s for q in preds], "peak_gib": [q.peak_gib for q in preds]})
    return {"unrepresented": unrepresented, "tasks": out}


def _jsonable(constants: dict) -> dict:
    return {k: (v if not isinstance(v, float) or math.isfinite(v) else None)
            for k, v in constants.items()}


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
