"""Enumerate every configuration of a workload on a cluster, predict each, rank them, and
give every ruled-out point its reason."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from autotune.plan.costmodel import CostModel
from autotune.plan.layout import Job
from autotune.plan.memory import stage_layer_counts
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import MemoryFit, Prediction
from autotune.settings import PlanSettings
from trials.contract.capabilities import unsupported_reason
from trials.contract.schema import (
    ConfigError,
    DType,
    ParallelConfig,
    TrialConfig,
    WorkloadConfig,
    dimension_problem,
)
from trials.contract.vocabulary import dtype_of, parse_split, recompute_mode


@dataclass
class PlanPoint:
    job: Job
    prediction: Prediction | None
    reason: str | None  # why it is ruled out; None = it fits
    memory_fit: MemoryFit | None = None
    #: What is unusual about a point that is planned all the same (uneven pipeline stages,
    #: tensor parallel across nodes): said beside it, never a reason to rule it out.
    flags: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.reason is None

    @property
    def tight(self) -> bool:
        """Fits, but the budget lies inside the predicted memory interval."""
        return self.fits and self.memory_fit is MemoryFit.TIGHT


def splits(devices: int) -> list[tuple[int, int, int]]:
    """Every (dp, mp, pp) with dp x mp x pp = devices."""
    out = []
    for mp in range(1, devices + 1):
        if devices % mp:
            continue
        for pp in range(1, devices // mp + 1):
            if (devices // mp) % pp == 0:
                out.append((devices // (mp * pp), mp, pp))
    return out


def pinned_splits(settings: PlanSettings, devices: int) -> list[tuple[int, int, int]]:
    """``plan.split``'s splits, or every split of the cluster; ConfigError for a split
    that does not use the cluster's devices."""
    if not settings.split:
        return splits(devices)
    out = []
    for text in settings.split:
        dp, mp, pp = parse_split(text, "plan.split")
        if dp * mp * pp != devices:
            raise ConfigError(f"plan.split value {text!r} uses {dp * mp * pp} devices; the "
                              f"cluster has {devices} (plan.nodes x hardware.devices): pin a "
                              "split whose product is that, or change plan.nodes")
        out.append((dp, mp, pp))
    return out


def dtypes(cfg: TrialConfig, settings: PlanSettings) -> list[DType]:
    if settings.precisions:
        return [dtype_of(name, "plan.precisions") for name in settings.precisions]
    hw = cfg.hardware
    return [d for d in DType if d is not DType.bfloat16 or hw.supports.get("bf16", False)]


def structural_reason(cfg: TrialConfig, w: WorkloadConfig, job: Job) -> str | None:
    """The rules a split breaks before any memory is counted. Layers that do not divide
    by the stages and tensor parallel wider than a node are not among them: both are
    planned and flagged (:func:`flags`)."""
    problem = dimension_problem(w, mp=job.mp, pp=1)
    if problem:
        return problem
    if w.n_layers < job.pp:
        return (f"workload.n_layers={w.n_layers} leaves a pipeline stage of pp={job.pp} "
                "without a layer")
    step = job.micro_batches * job.dp
    if job.global_batch % step:
        return (f"global batch {job.global_batch} is not divisible by {job.micro_batches} "
                f"micro-batches x dp {job.dp} (the nearest that is: "
                f"{-(-job.global_batch // step) * step})")
    if job.pp > 1 and job.micro_batches < job.pp:
        return f"micro-batches {job.micro_batches} < pipeline stages {job.pp}"
    probe = replace(cfg, parallel=ParallelConfig(dp=job.dp, mp=job.mp, pp=job.pp),
                    precision=replace(cfg.precision, dtype=job.dtype))
    return unsupported_reason(probe)


def flags(dims: ModelDims, job: Job, devices_per_node: int, nodes: int) -> tuple[str, ...]:
    """What a planned point does that most runs do not, said beside it: pipeline stages of
    unequal layers (the model counts the slowest stage's time and the first stage's
    memory), tensor parallel over more devices than a node has (its collectives cross the
    inter-node links, which the model charges)."""
    out = []
    counts = stage_layer_counts(dims, job)
    if len(set(counts)) > 1:
        runs = [(n, sum(1 for _ in group)) for n, group in itertools.groupby(counts)]
        out.append("uneven stages " + " + ".join(f"{k}x{n}" for n, k in runs) + " layers")
    if job.mp > devices_per_node:
        span = -(-job.mp // devices_per_node)
        out.append(f"t={job.mp} spans {span} nodes" if nodes > 1 else
                   f"t={job.mp} over {devices_per_node} devices a node")
    return tuple(out)


def micro_batch_counts(batch: int, dp: int, settings: PlanSettings) -> list[int]:
    """The listed counts, or every power of two dividing the replica's batch."""
    if settings.micro_batches:
        return list(settings.micro_batches)
    per_replica = max(1, batch // dp)
    return [2**k for k in range(per_replica.bit_length()) if per_replica % 2**k == 0]


def enumerate_jobs(cfg: TrialConfig, settings: PlanSettings, devices: int) -> list[Job]:
    batch = settings.global_batch or cfg.train.global_batch
    jobs = []
    for (dp, mp, pp), rc, sp, shard, dtype in itertools.product(
            pinned_splits(settings, devices), settings.recompute, settings.sequence_parallel,
            settings.optimizer_shard, dtypes(cfg, settings)):
        if (sp and mp == 1) or (shard and dp == 1):
            continue  # the same job as without it
        for m in micro_batch_counts(batch, dp, settings):
            # plan describes our trial program, which keeps an fp32 accumulator.
            jobs.append(Job(dp=dp, mp=mp, pp=pp, global_batch=batch, micro_batches=m,
                            dtype=dtype, recompute=recompute_mode(rc, "plan.recompute"),
                            sequence_parallel=sp, shard_level=int(shard),
                            fp32_accumulator=True))
    return jobs


def plan(cfg: TrialConfig, settings: PlanSettings, model: CostModel,
         budget_gib: float) -> list[PlanPoint]:
    """Every point, fitting ones first (best predicted tokens/s, then least memory)."""
    dims = ModelDims.of(cfg.workload)
    cluster = model.cluster
    points = []
    for job in enumerate_jobs(cfg, settings, cluster.devices):
        reason = structural_reason(cfg, cfg.workload, job)
        if reason:
            points.append(PlanPoint(job, None, reason))
            continue
        flagged = flags(dims, job, cluster.devices_per_node, cluster.nodes)
        prediction = model.predict_job(dims, job)
        fit = prediction.memory_fit(budget_gib)
        if fit is MemoryFit.OVER:
            reason = prediction.memory.explain(budget_gib)
        points.append(PlanPoint(job, prediction, reason, fit, flagged))
    return sorted(points, key=_rank)


def _rank(point: PlanPoint) -> tuple:
    p = point.prediction
    if p is None:
        return (2, 0.0, 0.0)
    return (0 if point.fits else 1, -(p.tokens_per_s or 0.0), p.peak_gib)


#: Trial knobs plan enumerates itself, and the plan setting that pins each: an override
#: of the knob would be ignored, so it is refused with the pin to use.
PINNED_BY = {"parallel.": "plan.split=[DPxMPxPP]", "train.micro_batches": "plan.micro_batches=[M]",
             "train.recompute": "plan.recompute=[MODE]", "precision": "plan.precisions=[NAME]"}


def ignored_override(overrides: list[str]) -> str | None:
    """The one line refusing an override plan would ignore, or None."""
    for override in overrides:
        key = override.partition("=")[0].lstrip("+~")
        for knob, pin in PINNED_BY.items():
            if key == knob or key.startswith(knob if knob.endswith(".") else knob + "."):
                return (f"plan ignores {override}: it enumerates every value of "
                        f"{knob.rstrip('.')}; pin it with {pin}")
    return None
