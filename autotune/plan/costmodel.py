"""The cost model for one hardware profile: predict a trial config, fit measured ones.

    model = CostModel.for_profile(cfg.hardware)   # the imported calibrate fit, else priors
    prediction = model.predict_config(cfg)        # None for a user workload (no dimensions)
    constants = model.fitted(measurements)        # least squares; stored by its owner

Which fit a study's model holds, and where a study keeps its refits: autotune/plan/fits.py.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from autotune.plan import calibration
from autotune.plan.calibration import Measurement
from autotune.plan.layout import Cluster, Job, cpu_compute_share
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import Constants, Prediction, predict
from autotune.presentation.invocation import autotune_command
from trials.contract.machine import cached_cpu_peak_flops
from trials.contract.schema import Backend, DType, HardwareConfig, TrialConfig


@dataclass
class CostModel:
    hardware: HardwareConfig
    nodes: int
    #: What predictions use now (a study's fit, the imported fit, or the priors).
    constants: Constants
    cache_dir: Path | None = None
    #: What a refit starts from: the fit ``calibrate`` imported for the profile, else the
    #: profile's priors (never the last fit, nor another study's).
    start: Constants | None = None
    #: The peak interval its predictions carry (None: the held-out error). 0 for the
    #: model of a simulated sweep, whose trials are this model's central predictions: a
    #: point it calls tight would certainly run out of memory there.
    memory_interval: float | None = None

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.constants

    @classmethod
    def for_profile(cls, hardware: HardwareConfig, *, nodes: int = 1,
                    cache_dir: Path | None = None) -> CostModel:
        """The model with the fit ``calibrate`` imported for the profile, else its priors."""
        prior = Constants.priors(hardware)
        return cls(hardware, nodes, calibration.load(hardware.name, prior, cache_dir),
                   cache_dir)

    @property
    def cluster(self) -> Cluster:
        """The profile's nodes; on the CPU backend, this host's cores, which every rank
        shares (the trials run here)."""
        cores = (os.cpu_count() or 1) if self.hardware.backend is Backend.CPU else None
        return Cluster(self.hardware, self.nodes, host_cores=cores)

    def peak_flops_per_device(self, job: Job) -> float | None:
        """The profile's peak, or on the CPU the verified GEMM calibration (all the host's
        cores) times the share of the cores one rank's operator threads get (the ranks are
        processes on the same cores: layout.cpu_compute_share)."""
        tflops = self.hardware.peak_tflops.get(job.dtype.value)
        if tflops is not None:
            return float(tflops) * 1e12
        if self.hardware.backend is Backend.CPU:
            peak = cached_cpu_peak_flops(job.dtype.value, self.cache_dir)
            return peak * cpu_compute_share(job, self.cluster.host_cores) if peak else None
        return None

    def peak_problem(self, dtype: DType) -> str | None:
        """Why step time cannot be predicted in ``dtype`` (no peak FLOP/s for it), with the
        fix for this profile's backend; None when there is a peak."""
        one = Job(dp=1, mp=1, pp=1, global_batch=1, micro_batches=1, dtype=dtype)
        if self.peak_flops_per_device(one) is not None:
            return None
        hw = self.hardware
        if hw.backend is Backend.CPU:
            # A trial alone on every core measures it once (trials/calibrate.peak_for):
            # the line says so, or a sweep that then proposes reads as contradicting it.
            return (f"no verified CPU peak FLOP/s for {dtype.value} is cached on this "
                    f"machine yet: a trial that runs alone on every core measures it once "
                    f"(the baseline, when no other process uses the cores), "
                    f"`{autotune_command('calibrate-host')}` measures it on a quiet host "
                    f"first, or give it: 'hardware.peak_tflops={{{dtype.value}: N}}'")
        return (f"hardware profile {hw.name} ({hw.backend.value}) has no peak FLOP/s for "
                f"{dtype.value}: add peak_tflops: {{{dtype.value}: N}} to the profile (the "
                f"vendor's dense TFLOP/s per device), or override "
                f"'hardware.peak_tflops={{{dtype.value}: N}}'")

    def predict_job(self, dims: ModelDims, job: Job) -> Prediction:
        prediction = predict(dims, job, self.cluster, self.constants,
                             peak_flops_per_device=self.peak_flops_per_device(job))
        if self.memory_interval is None:
            return prediction
        return dataclasses.replace(prediction, interval=self.memory_interval)

    def predict_config(self, cfg: TrialConfig) -> Prediction | None:
        """None for a user workload: its dimensions are not the cost model's to know."""
        if cfg.workload.entry:
            return None
        return self.predict_job(ModelDims.of(cfg.workload), Job.of(cfg))

    def measurement(self, cfg: TrialConfig, *, peak_gib: float | None = None,
                    step_s: float | None = None, data_wait_s: float = 0.0,
                    oom_budget_gib: float | None = None) -> Measurement | None:
        if cfg.workload.entry:
            return None
        job = Job.of(cfg)
        return Measurement(dims=ModelDims.of(cfg.workload), job=job, cluster=self.cluster,
                           peak_flops_per_device=self.peak_flops_per_device(job),
                           peak_gib=peak_gib, step_s=step_s, data_wait_s=data_wait_s,
                           oom_budget_gib=oom_budget_gib)

    def time_terms(self, cfg: TrialConfig) -> set[str]:
        """The time constants this configuration's prediction rests on
        (:func:`calibration.time_terms`); none for a user workload."""
        m = self.measurement(cfg)
        return set() if m is None else calibration.time_terms(m)

    def fitted(self, measurements: list[Measurement]) -> Constants:
        """The constants these measurements support, fitted from ``start`` (not from the
        last fit); the caller decides whether to use and store them."""
        return calibration.fit(measurements, self.start)
