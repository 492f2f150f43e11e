"""The cost model's answer for one job: peak memory and step time with their breakdowns,
tokens/s, MFU, and the model's own uncertainty."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from autotune.plan import memory, steptime
from autotune.plan.layout import Cluster, Job, Recompute
from autotune.plan.model_dims import ModelDims, model_flops_per_token
from autotune.study.schema.prediction import StoredPrediction
from trials.contract.schema import ConfigError, CostPriors, DType, HardwareConfig, Mode


@dataclass(frozen=True)
class Constants:
    """The free constants (priors from the profile, or a calibration's fit)."""

    #: Achieved / roofline FLOP/s of the GEMMs (steptime.compute_s), per dtype value.
    compute_efficiency: dict[str, float]
    #: Achieved / nominal bandwidth of the tensor-parallel and of the data-parallel
    #: collectives, fitted apart (their sizes, dtypes and overlap differ).
    mp_collective_efficiency: float
    dp_collective_efficiency: float
    #: Fixed seconds per layer and micro-batch (steptime.layer_latency_term_s).
    layer_latency_s: float
    step_overhead_s: float
    #: PyNative's own layer latency and step overhead (every op dispatched from Python).
    pynative_layer_latency_s: float
    pynative_step_overhead_s: float
    runtime_overhead_gib: float
    allocator_factor: float
    activation_factor: dict[str, float]  # per dtype value: a backend may keep extra copies
    data_wait_s: float = 0.0
    #: The shortest a GEMM takes (steptime.compute_parts): one shorter than the host's
    #: time to issue the next kernel leaves the device idle. 0 in every profile's priors
    #: (none measures it); a fit of many shapes sets it (calibration.KERNEL_FLOORS_S).
    kernel_floor_s: float = 0.0
    recompute_frees_memory: bool = True
    #: Relative error of memory and of step time (1 sigma), from the fit's residuals. The
    #: interval the memory guard applies is not this: ``memory_interval()``.
    memory_uncertainty: float = 0.3
    time_uncertainty: float = 0.3
    #: Where the numbers came from ("priors of profile cpu", "fit of 12 trials").
    source: str = "priors"
    #: The dtypes (values) whose compute efficiency, and whose activation factor, a fit
    #: measured (empty: the priors, or a fit stored before these were kept): every other
    #: dtype's is its prior (coverage.py says so).
    efficiency_dtypes: list = field(default_factory=list)
    activation_dtypes: list = field(default_factory=list)

    def efficiency_source(self, dtype: str, hw: HardwareConfig) -> str:
        """The dtype whose fitted compute efficiency ``dtype`` predicts with: its own where
        a fit measured it, else a measured dtype with the same datasheet peak on ``hw``
        (the same tensor-core path: fp16 and bf16 on an A100), else its own prior."""
        if not self.efficiency_dtypes or dtype in self.efficiency_dtypes:
            return dtype
        peak = hw.peak_tflops.get(dtype)
        return next((f for f in sorted(self.efficiency_dtypes)
                     if peak is not None and hw.peak_tflops.get(f) == peak), dtype)

    def efficiency(self, dtype: str, hw: HardwareConfig) -> float:
        """Achieved / roofline FLOP/s of ``dtype``'s GEMMs (steptime.compute_s): its own
        fitted or prior value, or its datasheet twin's (efficiency_source), at most the
        device's measured ceiling (``cost.compute_ceiling``: constants fitted on one device
        and read on another, an A100 fit planning an H100, do not carry the first's
        efficiency past what the second's GEMMs reach)."""
        return min(self.compute_efficiency[self.efficiency_source(dtype, hw)],
                   hw.cost.compute_ceiling)

    def layer_latency(self, mode: Mode) -> float:
        return self.pynative_layer_latency_s if mode is Mode.pynative else self.layer_latency_s

    def step_overhead(self, mode: Mode) -> float:
        return self.pynative_step_overhead_s if mode is Mode.pynative else self.step_overhead_s

    @classmethod
    def priors(cls, hw: HardwareConfig) -> Constants:
        c: CostPriors = hw.cost
        return cls(compute_efficiency={d.value: c.compute_efficiency for d in DType},
                   mp_collective_efficiency=c.collective_efficiency,
                   dp_collective_efficiency=c.collective_efficiency,
                   layer_latency_s=c.layer_latency_s,
                   step_overhead_s=c.step_overhead_s,
                   pynative_layer_latency_s=c.pynative_layer_latency_s,
                   pynative_step_overhead_s=c.pynative_step_overhead_s,
                   runtime_overhead_gib=c.runtime_overhead_gib,
                   allocator_factor=c.allocator_factor,
                   activation_factor={d.value: c.activation_factor for d in DType},
                   recompute_frees_memory=c.recompute_frees_memory,
                   memory_uncertainty=c.uncertainty, time_uncertainty=c.uncertainty,
                   source=f"priors of hardware profile {hw.name}")


#: The model's held-out memory error: the largest relative error of the predicted peak on
#: the real CPU trials held out of the fit (bench/cost_model_cpu.py on the committed
#: measurements: +8.3 %, docs/benchmarks-history.md, "After issue 21's first terms"),
#: rounded up. Every memory prediction carries it as an interval, peak x (1 -+ this).
HELD_OUT_MEMORY_ERROR = 0.09


def memory_interval() -> float:
    """The relative half-width of every predicted peak's interval: the one number the
    guard (``Prediction.memory_fit``: the sweep's predicted_oom, plan's ruled out and
    tight) applies and every printed "memory +-N %" states. It is the held-out error, not
    a fit's in-sample residual (``Constants.memory_uncertainty``, which a fit of three
    trials can make small or the priors' 0.3 large): a bound checked on trials the fit
    had not seen."""
    return HELD_OUT_MEMORY_ERROR


class MemoryFit(enum.Enum):
    """Where the budget falls in a prediction's memory interval."""

    FITS = "fits"  # even the pessimistic end is within the budget
    TIGHT = "tight"  # the budget is inside the interval: launch, and say so
    OVER = "over"  # even the optimistic end exceeds the budget: rule it out


@dataclass(frozen=True)
class Prediction:
    job: Job
    memory: memory.MemoryBreakdown
    time: steptime.TimeBreakdown | None  # None when the peak FLOP/s is unknown
    tokens_per_step: int
    model_flops_per_token: float
    peak_flops_total: float | None
    constants: Constants = field(repr=False)
    #: The relative half-width of the peak's interval: the held-out error
    #: (:func:`memory_interval`), or 0 where the peak is the truth it is judged against
    #: (a simulated sweep's trials run out of memory exactly at this central peak).
    interval: float = field(default_factory=memory_interval)

    @property
    def peak_gib(self) -> float:
        return self.memory.peak_gib

    @property
    def peak_interval_gib(self) -> tuple[float, float]:
        """(optimistic, pessimistic) peak: the interval either side."""
        return (self.peak_gib * (1 - self.interval), self.peak_gib * (1 + self.interval))

    def memory_fit(self, budget_gib: float) -> MemoryFit:
        """OVER only when even the optimistic end exceeds the budget; TIGHT when the budget
        is inside the interval."""
        low, high = self.peak_interval_gib
        if low > budget_gib:
            return MemoryFit.OVER
        return MemoryFit.TIGHT if high > budget_gib else MemoryFit.FITS

    def over_budget(self, budget_gib: float) -> bool:
        """The guard's rule (the sweep's and plan's): out only when even the optimistic
        end is over."""
        return self.memory_fit(budget_gib) is MemoryFit.OVER

    @property
    def step_s(self) -> float | None:
        return self.time.step_s if self.time is not None else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens_per_step / self.step_s if self.step_s else None

    @property
    def mfu(self) -> float | None:
        if self.tokens_per_s is None or not self.peak_flops_total:
            return None
        return self.tokens_per_s * self.model_flops_per_token / self.peak_flops_total

    def record(self) -> dict:
        """JSON-ready: what a trial record stores as its prediction."""
        return StoredPrediction(
            peak_gib=self.peak_gib, peak_interval_gib=list(self.peak_interval_gib),
            memory_gib=self.memory.gib(), step_s=self.step_s, tokens_per_s=self.tokens_per_s,
            mfu=self.mfu, time_s=self.time.seconds() if self.time else None,
            memory_uncertainty=self.constants.memory_uncertainty,
            time_uncertainty=self.constants.time_uncertainty,
            constants=self.constants.source).to_json()


def check_links(job: Job, cluster: Cluster) -> None:
    """ConfigError when the profile lacks a bandwidth this job's collectives need, naming
    the override that gives it (or the profile's file)."""
    hw = cluster.hardware
    needed = (("intra_node", job.devices > 1, f"split {job.split}"),
              ("inter_node", cluster.nodes > 1, f"{cluster.nodes} nodes"))
    for level, needs, what in needed:
        if needs and getattr(hw, level).bandwidth_gbs is None:
            raise ConfigError(f"hardware profile {hw.name} has no {level}.bandwidth_gbs: the "
                              f"cost model needs it for {what}; give it as "
                              f"hardware.{level}.bandwidth_gbs=<GB/s> or add it to "
                              f"conf/hardware/{hw.name}.yaml")


def predict(d: ModelDims, job: Job, cluster: Cluster, constants: Constants, *,
            peak_flops_per_device: float | None) -> Prediction:
    """Memory always; time only where the device's peak FLOP/s for the dtype is known."""
    check_links(job, cluster)
    # Where the backend keeps activations under recompute, memory is counted without it.
    memory_job = job if constants.recompute_frees_memory else replace(
        job, recompute=Recompute.none)
    mem = memory.breakdown(d, memory_job, runtime_overhead_gib=constants.runtime_overhead_gib,
                           allocator_factor=constants.allocator_factor,
                           activation_factor=constants.activation_factor[job.dtype.value])
    time = None
    if peak_flops_per_device:
        time = steptime.breakdown(
            d, job, cluster, peak_flops=peak_flops_per_device,
            compute_efficiency=constants.efficiency(job.dtype.value, cluster.hardware),
            mp_collective_efficiency=constants.mp_collective_efficiency,
            dp_collective_efficiency=constants.dp_collective_efficiency,
            layer_latency_s=constants.layer_latency(job.mode),
            step_overhead_s=constants.step_overhead(job.mode),
            data_wait_s=constants.data_wait_s, kernel_floor_s=constants.kernel_floor_s)
    total = peak_flops_per_device * job.devices if peak_flops_per_device else None
    return Prediction(job=job, memory=mem, time=time, tokens_per_step=job.global_batch * d.seq,
                      model_flops_per_token=model_flops_per_token(d), peak_flops_total=total,
                      constants=constants)
