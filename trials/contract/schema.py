"""Typed schema of a trial's configuration (plain Python, no MindSpore).

Every knob autotune tunes is a field here, addressed by its override path
(``runtime.mode``, ``parallel.dp``, ``train.micro_batches`` ...). The YAML in
``conf/`` fills it in; OmegaConf checks types and enum values at compose time,
:func:`~trials.contract.rules.check_fields` checks each field's range (declared
next to the field) and :func:`validate` checks the rules that span fields.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from trials.contract.paths import OUTPUT_DIR
from trials.contract.rules import ConfigError, check_fields, rule
from trials.contract.vocabulary import (
    PRECISIONS,
    TRIAL_RECOMPUTE,
    DType,
    Recompute,
    format_split,
    precision_name,
)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"



class Mode(str, enum.Enum):
    graph = "graph"
    pynative = "pynative"


class JitLevel(str, enum.Enum):
    O0 = "O0"
    O1 = "O1"


class MemoryLevel(str, enum.Enum):
    O0 = "O0"
    O1 = "O1"


class LossScale(str, enum.Enum):
    none = "none"
    static = "static"
    dynamic = "dynamic"


class DataSource(str, enum.Enum):
    text = "text"  # byte-level tokens, tokenized on the fly in dataset workers
    mindrecord = "mindrecord"  # the same text, tokenized once into a MindRecord cache
    synthetic = "synthetic"  # random tokens, no input cost


class RunMode(str, enum.Enum):
    trial = "trial"  # warmup + measure steps, then a scorecard
    production = "production"  # long run with checkpoints and resume


class Backend(str, enum.Enum):
    CPU = "CPU"
    GPU = "GPU"
    Ascend = "Ascend"


class Arch(str, enum.Enum):
    """The transformer family: what the cost model counts (and what the trial can build)."""

    gpt = "gpt"  # learned positions, LayerNorm, biases, GELU MLP, tied embeddings (model.py)
    llama = "llama"  # RoPE, RMSNorm, no biases, SwiGLU MLP, untied head, grouped KV heads


@dataclass
class WorkloadConfig:
    """The model being trained. ``entry`` selects a user workload instead of the GPT.

    The dimensions also feed the cost model (``python -m autotune plan``), which is how
    presets of models this machine cannot train (``workload=llama2_70b``) are used.
    """

    name: str = MISSING
    #: ``"package.module:factory"`` of a user workload (docs/how-to/own-model.md);
    #: empty = built-in GPT.
    entry: str = ""
    arch: Arch = Arch.gpt
    n_layers: int = field(default=2, metadata=rule(ge=1))
    d_model: int = field(default=64, metadata=rule(ge=1))
    n_heads: int = field(default=2, metadata=rule(ge=1))
    #: Key/value heads (grouped-query attention); 0 = n_heads.
    kv_heads: int = field(default=0, metadata=rule(ge=0))
    #: Feed-forward width; 0 = 4 x d_model.
    ffn_dim: int = field(default=0, metadata=rule(ge=0))
    seq_len: int = field(default=32, metadata=rule(ge=2))
    #: Byte-level tokens: 256 symbols (the text and MindRecord sources need all of them).
    vocab_size: int = field(default=256, metadata=rule(ge=2))
    #: Free-form options handed to a user workload's factory.
    options: dict = field(default_factory=dict)

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.n_heads

    @property
    def ffn(self) -> int:
        return self.ffn_dim or 4 * self.d_model


@dataclass
class PrecisionConfig:
    """Compute dtype and how mixed precision is applied (``mindspore.amp``).

    Chosen by the config group (``precision=fp16``): its name is a precision name and its
    dtype the one :data:`~trials.contract.vocabulary.PRECISIONS` maps it to.
    """

    name: str = "fp32"
    dtype: DType = DType.float32
    #: ``auto_mixed_precision`` level: O0 (none), O1, O2, O3 or auto.
    amp_level: str = field(default="O0", metadata=rule(one_of=("O0", "O1", "O2", "O3", "auto")))
    loss_scale: LossScale = LossScale.none
    init_scale: float = field(default=65536.0, metadata=rule(gt=0))
    scale_factor: int = field(default=2, metadata=rule(ge=2))
    scale_window: int = field(default=1000, metadata=rule(ge=1))


@dataclass
class RuntimeConfig:
    """Execution: mode, jit level, memory optimisation, CPU threads."""

    mode: Mode = Mode.graph
    jit_level: JitLevel = JitLevel.O0
    memory_optimize_level: MemoryLevel = MemoryLevel.O0
    #: CPU operator threads (``device_context.cpu.op_tuning.threads_num``); 0 = default.
    threads: int = field(default=0, metadata=rule(ge=0))


@dataclass
class ParallelConfig:
    """The device split: data x model (tensor) x pipeline parallel.

    ``parallel.split=2x1x1`` sets all three in any command (trials/contract/vocabulary.py).
    """

    dp: int = field(default=1, metadata=rule(ge=1))
    mp: int = field(default=1, metadata=rule(ge=1))
    pp: int = field(default=1, metadata=rule(ge=1))

    @property
    def devices(self) -> int:
        return self.dp * self.mp * self.pp

    @property
    def split(self) -> str:
        """The split as the search space writes it: ``"DPxMPxPP"``."""
        return format_split(self.dp, self.mp, self.pp)


@dataclass
class TrainConfig:
    """Optimisation. ``global_batch`` stays fixed while the split changes."""

    global_batch: int = field(default=8, metadata=rule(ge=1))
    #: Gradient-accumulation steps (pp = 1) or pipeline micro-batch count (pp > 1).
    micro_batches: int = field(default=1, metadata=rule(ge=1))
    lr: float = field(default=1e-3, metadata=rule(gt=0))
    weight_decay: float = field(default=0.01, metadata=rule(ge=0))
    clip_norm: float = field(default=1.0, metadata=rule(gt=0))
    #: Activation recompute: none, or full (``cell.recompute()`` on every block); the
    #: trial program has no selective (the cost model has: ``plan.recompute``).
    recompute: Recompute = Recompute.none
    seed: int = field(default=1234, metadata=rule(ge=0))


@dataclass
class DataConfig:
    """Input pipeline (``mindspore.dataset``)."""

    source: DataSource = DataSource.text
    #: Directory of text files; empty = the Python standard library's sources.
    text_dir: str = ""
    #: Cap on bytes indexed from text_dir (keeps start-up short).
    max_bytes: int = field(default=8_000_000, metadata=rule(ge=4096))
    num_workers: int = field(default=1, metadata=rule(ge=1))
    multiprocessing: bool = False
    prefetch: int = field(default=16, metadata=rule(ge=1))
    #: Where MindRecord caches and the CPU peak calibration live; empty = ~/.cache/autotune.
    cache_dir: str = field(default="", metadata=rule(path=OUTPUT_DIR))


@dataclass
class RunConfig:
    """What the process does: a short measured trial or a production run."""

    mode: RunMode = RunMode.trial
    #: false: exactly ``warmup_steps`` warm-up and ``measure_steps`` measured steps.
    adaptive: bool = True
    #: Warm-up steps after the compile step, at least: on CPU, MindSpore's steps 1-4 run
    #: ~30 % slower than later ones (bench/trial_repeatability.py). Warm-up goes on until
    #: the step time is steady (trials/contract/stats.py: ``steady``), at most
    #: ``max_warmup_steps`` (null = 2 x warmup_steps).
    warmup_steps: int = field(default=4, metadata=rule(ge=0))
    max_warmup_steps: int | None = field(default=None, metadata=rule(ge=0))
    #: Two windows of this many steps whose step times (means) agree within
    #: ``steady_tolerance`` end the warm-up.
    steady_window: int = field(default=2, metadata=rule(ge=1))
    steady_tolerance: float = field(default=0.05, metadata=rule(gt=0, lt=1))
    #: Measured steps, at least. Measuring goes on until the 95 % interval of the
    #: step time is within +-``target_interval`` (0.02 = +-2 %), at most
    #: ``max_measure_steps`` (null = 4 x measure_steps).
    measure_steps: int = field(default=8, metadata=rule(ge=2))
    max_measure_steps: int | None = field(default=None, metadata=rule(ge=2))
    target_interval: float = field(default=0.02, metadata=rule(gt=0, lt=1))
    #: Reuse MindSpore's compiled graphs across runs of the identical configuration
    #: (repeats, confirm, racing): one cache per hash of the resolved config and the
    #: source, so that it never serves a different configuration (trials/compile_cache.py).
    compile_cache: bool = True
    #: Production mode: total optimizer steps.
    steps: int = field(default=100, metadata=rule(ge=1))
    checkpoint_every: int = field(default=50, metadata=rule(ge=1))
    keep_checkpoints: int = field(default=3, metadata=rule(ge=1))
    checkpoint_dir: str = "checkpoints"
    #: Production mode: continue from the latest checkpoint in checkpoint_dir.
    resume: bool = True
    metrics_path: str = "metrics.jsonl"
    #: After measuring (trial mode), run this many more steps under mindspore.profiler and
    #: report where the time goes (trials/profiling.py); 0 = no profiling. The profiled
    #: steps are kept out of every measured number.
    profile_steps: int = field(default=0, metadata=rule(ge=0, le=100))
    profile_dir: str = "profile"
    #: After measuring (trial mode): time this many batches of a fresh copy of the input
    #: pipeline alone, and this many steps of the step alone on one batch, so that the
    #: scorecard says what the pipeline delivers and what the step consumes (a pipeline
    #: that competes with the step for the cores shows no data wait). 0 = no probe.
    probe_batches: int = field(default=8, metadata=rule(ge=0, le=100))
    #: Fault injection for testing the soak's leak detector: hold this many MiB more host
    #: memory after every step. 0 = off; never set it in a real job.
    inject_leak_mib: float = field(default=0.0, metadata=rule(ge=0, le=1024))


@dataclass
class GuardConfig:
    """Divergence and memory guards: the trial stops itself with an outcome."""

    #: Consecutive non-finite losses before the run counts as diverged; in a production
    #: run (run.mode=production) also consecutive loss spikes.
    nonfinite_patience: int = field(default=3, metadata=rule(ge=1))
    #: A loss at or above this factor x the median of the previous 20 finite losses is a
    #: spike (trials/contract/performance.py, the one spike rule): its update is skipped;
    #: a trial is then diverged, a production run only after nonfinite_patience in a row.
    spike_factor: float = field(default=8.0, metadata=rule(gt=1))
    #: Finite losses before spike detection starts.
    spike_after_steps: int = field(default=3, metadata=rule(ge=1))
    #: Memory budget per rank in GiB; null = the hardware profile's device memory.
    memory_budget_gib: float | None = field(default=None, metadata=rule(gt=0))
    #: Address-space limit = this factor x budget (thread stacks inflate virtual size).
    address_space_factor: float = field(default=4.0, metadata=rule(ge=1))


@dataclass
class LinkConfig:
    """One level of interconnect, per device and direction (vendor figures, see the profile)."""

    #: GB/s (1e9 bytes per second); null = unknown (the cost model then refuses to plan).
    bandwidth_gbs: float | None = field(default=None, metadata=rule(gt=0))
    latency_us: float = field(default=10.0, metadata=rule(ge=0))
    #: Every device wired to every other by a link of its own (HCCS inside an Ascend 910B
    #: node, Infinity Fabric inside an MI300X node), where a switch (NVSwitch) gives each
    #: device one port: ``bandwidth_gbs`` is then one link's, and a collective over g
    #: devices drives g - 1 links at once.
    full_mesh: bool = False
    #: The share of ``bandwidth_gbs`` the vendor's collective library moves on this link,
    #: as its benchmark measures it (nccl-tests' or HCCL's all-reduce bus bandwidth at
    #: large messages over the line rate: NVLink's protocol overhead, HCCS's). Every
    #: transfer on the link is charged at the line rate x this; the calibrated collective
    #: efficiency is relative to it, so no fit makes a collective faster than what its
    #: library reaches. 1.0 where no benchmark is known (the profile cites each figure).
    achieved_fraction: float = field(default=1.0, metadata=rule(gt=0, le=1))

    @property
    def achieved_gbs(self) -> float | None:
        """GB/s one link moves as its collective library drives it: the line rate x
        ``achieved_fraction`` (None where the line rate is unknown)."""
        return None if self.bandwidth_gbs is None else self.bandwidth_gbs * self.achieved_fraction

    def links(self, ranks: int) -> int:
        """Links one device drives at once in an all-reduce over ``ranks`` devices: its
        switch port, or on a full mesh one to each of its g - 1 peers (HCCL's mesh
        algorithm inside a 910B node)."""
        return max(1, ranks - 1) if self.full_mesh else 1

    def bus_bandwidth_gbs(self, ranks: int) -> float | None:
        """GB/s an all-reduce over ``ranks`` devices of this level moves per device, its
        bus bandwidth (nccl-tests' busbw: the all-reduce's 2 (g-1)/g n bytes over its
        time): ``links`` x what a link achieves (``achieved_gbs``)."""
        achieved = self.achieved_gbs
        return None if achieved is None else achieved * self.links(ranks)


@dataclass
class CostPriors:
    """The cost model's free constants before calibration on this profile and machine.

    ``python -m autotune sweep`` refits them from measured trials (least squares) and
    stores the fit per profile and machine; until then these priors stand.
    """

    #: Achieved / peak FLOP/s of the model's matmul work.
    compute_efficiency: float = field(default=0.5, metadata=rule(gt=0, le=1))
    #: The most of ``peak_tflops`` any GEMM reaches on this device, as a GEMM benchmark
    #: measured it: no fit and no prediction puts the step's GEMMs above it. 1.0 where no
    #: benchmark is known, or where the peak itself is measured (the CPU's calibrate-host).
    compute_ceiling: float = field(default=1.0, metadata=rule(gt=0, le=1))
    #: A training step's collectives over what the link's library achieves
    #: (``LinkConfig.achieved_gbs``: its benchmark's bus bandwidth): the prior of both the
    #: tensor- and the data-parallel efficiency, which calibration fits apart, at most 1.
    collective_efficiency: float = field(default=1.0, metadata=rule(gt=0, le=1))
    #: Fixed time per layer and micro-batch (forward + backward + recompute): kernel
    #: launches and host work that scale neither with FLOPs nor with bytes moved.
    layer_latency_s: float = field(default=0.0, metadata=rule(ge=0))
    #: Fixed time per optimizer step (launch, Python, host sync).
    step_overhead_s: float = field(default=0.0, metadata=rule(ge=0))
    #: The same two under PyNative (every op dispatched from Python); 0 until calibrated.
    pynative_layer_latency_s: float = field(default=0.0, metadata=rule(ge=0))
    pynative_step_overhead_s: float = field(default=0.0, metadata=rule(ge=0))
    #: Memory held before any model state: runtime, workspace, communication library.
    runtime_overhead_gib: float = field(default=1.0, metadata=rule(ge=0))
    #: Allocated / requested memory (fragmentation, pools).
    allocator_factor: float = field(default=1.1, metadata=rule(ge=1))
    #: Measured / formula activation memory (Korthikanti et al. 2022 counts).
    activation_factor: float = field(default=1.0, metadata=rule(gt=0))
    #: Relative error assumed before any calibration (reported as the model's uncertainty).
    uncertainty: float = field(default=0.3, metadata=rule(gt=0))
    #: Whether recompute frees activation memory on this backend (MindSpore's CPU
    #: backend keeps them: no RSS saving measured, docs/mindspore-cpu.md).
    recompute_frees_memory: bool = True
    #: Measurement noise that simulated trials reproduce: the coefficient of variation of
    #: tokens/s between runs of one configuration, and of step time within a run.
    run_to_run_cv: float = field(default=0.05, metadata=rule(ge=0, lt=1))
    step_to_step_cv: float = field(default=0.02, metadata=rule(ge=0, lt=1))


@dataclass
class HardwareConfig:
    """A hardware profile: what the backend offers and its peak FLOP/s."""

    name: str = MISSING
    backend: Backend = Backend.CPU
    #: Devices (or CPU worker processes) available to one job.
    devices: int = field(default=1, metadata=rule(ge=1))
    device_memory_gib: float = field(default=8.0, metadata=rule(gt=0))
    #: Peak TFLOP/s per dtype (float32, float16, bfloat16) of the unit that runs the GEMMs
    #: (a GPU's tensor cores, an Ascend's cube), dense: the GEMMs' roofline and MFU's
    #: denominator; null = measured on this machine (CPU), else unknown (no step time).
    peak_tflops: dict = field(default_factory=dict)
    #: Compute units a GEMM's output tiles are spread over (an NVIDIA GPU's streaming
    #: multiprocessors, an Ascend's AI cores); null = unknown (a CPU): the cost model then
    #: charges a GEMM its plain FLOPs, without wave quantisation (autotune/plan/kernels.py).
    compute_units: int | None = field(default=None, metadata=rule(ge=1))
    #: Device memory bandwidth, GB/s (the datasheet's): memory-bound kernels (norms,
    #: activations, residual adds, attention softmax) cost their bytes over it
    #: (autotune/plan/steptime.memory_bound_s); null = unknown: not charged apart (a CPU).
    memory_bandwidth_gbs: float | None = field(default=None, metadata=rule(gt=0))
    #: What this backend can run: bf16, model_parallel, pipeline_parallel (the one source
    #: of backend capability: trials/contract/capabilities.py reads it).
    supports: dict = field(default_factory=dict)
    #: Links between devices of one node, and between nodes (``devices`` = per node).
    intra_node: LinkConfig = field(default_factory=LinkConfig)
    inter_node: LinkConfig = field(default_factory=LinkConfig)
    cost: CostPriors = field(default_factory=CostPriors)


@dataclass
class TrialConfig:
    """One trial: a workload under one setting of every knob."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    run: RunConfig = field(default_factory=RunConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)


TRIAL_KEYS = tuple(TrialConfig.__dataclass_fields__)


def knob_values(cfg: TrialConfig) -> dict[str, object]:
    """Every setting of a trial as the overrides write it: ``runtime.mode`` -> ``"graph"``
    (an enum by its value), and a config group chosen by name by that name
    (``precision`` -> ``"fp16"``). What advice reads to leave out a change the run has."""
    out: dict[str, object] = {}
    for group in TRIAL_KEYS:
        section = getattr(cfg, group)
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if dataclasses.is_dataclass(value):
                continue
            out[f"{group}.{f.name}"] = value.value if isinstance(value, enum.Enum) else value
        if "name" in {f.name for f in dataclasses.fields(section)}:
            out[group] = section.name
    return out


def micro_batch_size(cfg: TrialConfig) -> int:
    """Samples per rank per forward pass: global = size x micro_batches x dp."""
    return cfg.train.global_batch // (cfg.train.micro_batches * cfg.parallel.dp)


def accumulation_steps(cfg: TrialConfig) -> int:
    """Gradient accumulation steps (micro-batches go to the pipeline when pp > 1)."""
    return 1 if cfg.parallel.pp > 1 else cfg.train.micro_batches


def step_caps(run: RunConfig) -> tuple[int, int]:
    """(most warm-up steps, most measured steps) of a trial."""
    if not run.adaptive:
        return run.warmup_steps, run.measure_steps
    warmup = run.max_warmup_steps if run.max_warmup_steps is not None else 2 * run.warmup_steps
    measure = (run.max_measure_steps if run.max_measure_steps is not None
               else 4 * run.measure_steps)
    return warmup, measure


def validate(cfg: TrialConfig) -> None:
    """Every field's range, then the rules that span fields. ConfigError names the override."""
    for key in TRIAL_KEYS:
        check_fields(getattr(cfg, key), key)
    _check_hardware(cfg.hardware)
    _check_vocabulary(cfg)
    p, t, w, r = cfg.parallel, cfg.train, cfg.workload, cfg.run
    if r.max_warmup_steps is not None and r.max_warmup_steps < r.warmup_steps:
        raise ConfigError(f"run.max_warmup_steps={r.max_warmup_steps} is below "
                          f"run.warmup_steps={r.warmup_steps}; raise it or lower the floor")
    if r.max_measure_steps is not None and r.max_measure_steps < r.measure_steps:
        raise ConfigError(f"run.max_measure_steps={r.max_measure_steps} is below "
                          f"run.measure_steps={r.measure_steps}; raise it or lower the floor")
    if t.global_batch % (t.micro_batches * p.dp):
        raise ConfigError(
            f"train.global_batch={t.global_batch} is not divisible by "
            f"train.micro_batches x parallel.dp = {t.micro_batches} x {p.dp}; "
            "change one of them")
    if p.pp > 1 and t.micro_batches < p.pp:
        raise ConfigError(f"train.micro_batches={t.micro_batches} must be >= parallel.pp={p.pp} "
                          "for pipeline parallel")
    if not w.entry:
        dims_problem = dimension_problem(w, mp=p.mp, pp=p.pp)
        if dims_problem:
            raise ConfigError(dims_problem)
    if not w.entry and cfg.data.source is not DataSource.synthetic and w.vocab_size < 256:
        raise ConfigError(f"workload.vocab_size={w.vocab_size}: the {cfg.data.source.value} "
                          "source yields byte tokens 0..255; use >= 256 or data=synthetic")
    if w.entry and ":" not in w.entry:
        raise ConfigError(f"workload.entry={w.entry!r} must look like 'package.module:factory'")
    if w.entry:
        from trials.contract.mindformers import workload_problem

        problem = workload_problem(cfg)
        if problem:
            raise ConfigError(problem)


def dimension_problem(w: WorkloadConfig, *, mp: int = 1, pp: int = 1) -> str | None:
    """Why these model dimensions cannot be split this way, or None."""
    if w.d_model % w.n_heads:
        return f"workload.d_model={w.d_model} is not divisible by workload.n_heads={w.n_heads}"
    if w.n_heads % w.n_kv_heads:
        return (f"workload.n_heads={w.n_heads} is not divisible by "
                f"workload.kv_heads={w.kv_heads}")
    # Model parallel splits the query heads and the key/value heads: name the one that
    # does not split (a grouped-query model's 8 KV heads, not its 64 query heads).
    for name, heads in (("workload.n_heads", w.n_heads), ("workload.kv_heads", w.n_kv_heads)):
        if heads % mp:
            return f"{name}={heads} is not divisible by parallel.mp={mp}"
    if w.n_layers % pp:
        return f"workload.n_layers={w.n_layers} is not divisible by parallel.pp={pp}"
    return None


def runnable_problem(cfg: TrialConfig) -> str | None:
    """Why the built-in trial program cannot train this workload (a dimensions-only preset)."""
    w = cfg.workload
    if w.entry:
        return None
    if w.arch is not Arch.gpt or w.ffn != 4 * w.d_model or w.n_kv_heads != w.n_heads:
        return (f"workload {w.name} (arch={w.arch.value}) has dimensions only: the built-in "
                "trial program trains arch=gpt with ffn_dim=4 x d_model and no grouped KV "
                "heads; plan it with `python -m autotune plan`, or sweep it with "
                "sweep.simulate=true")
    return None


#: Capability flags a hardware profile may declare (trials/contract/capabilities.py).
CAPABILITY_FLAGS = ("bf16", "model_parallel", "pipeline_parallel")


def _check_vocabulary(cfg: TrialConfig) -> None:
    """The precision group's dtype is its name's; the trial program's recompute modes."""
    name, dtype = cfg.precision.name, cfg.precision.dtype
    if name in PRECISIONS and PRECISIONS[name] is not dtype:
        raise ConfigError(f"precision.dtype={dtype.value} contradicts precision={name}; the "
                          "precision group sets the dtype: write "
                          f"precision={precision_name(dtype)}")
    if cfg.train.recompute not in TRIAL_RECOMPUTE:
        raise ConfigError(f"train.recompute={cfg.train.recompute.value}: the trial program "
                          "recomputes every block or nothing; write full or none "
                          "(selective is a mode of plan.recompute)")


def _check_hardware(hw: HardwareConfig) -> None:
    for dtype, tflops in hw.peak_tflops.items():
        if dtype not in DType.__members__:
            # Keyed by dtype, not precision name: fp16 is float16 here.
            hint = f"write {PRECISIONS[dtype].value}; " if dtype in PRECISIONS else ""
            raise ConfigError(f"hardware.peak_tflops.{dtype}: unknown dtype; {hint}use "
                              f"{', '.join(DType.__members__)}")
        if tflops is not None and (not isinstance(tflops, (int, float)) or tflops <= 0):
            null = ("to measure it on this machine" if hw.backend is Backend.CPU
                    else "where it is unknown (then no step time is predicted)")
            raise ConfigError(f"hardware.peak_tflops.{dtype}={tflops!r} must be a positive "
                              f"number of TFLOP/s, or null {null}")
    for flag, value in hw.supports.items():
        if flag not in CAPABILITY_FLAGS:
            raise ConfigError(f"hardware.supports.{flag}: unknown capability; the profile "
                              f"may declare {', '.join(CAPABILITY_FLAGS)}")
        if not isinstance(value, bool):
            raise ConfigError(f"hardware.supports.{flag}={value!r} must be true or false")


@functools.cache
def _schema() -> DictConfig:
    """TrialConfig as a structured node, built once: building it is most of a conversion's
    cost (26 of ~45 ms), and a plan or a space's memory check converts thousands of points.
    ``OmegaConf.merge`` copies its first argument, so the cached node is never changed."""
    return OmegaConf.structured(TrialConfig)


def as_field(path: str, value: Any) -> Any:
    """``value`` as TrialConfig's field at ``path`` reads it (``"2"`` is 2 for an int field,
    ``"graph"`` the mode): two values equal so are one setting. ``value`` itself where no
    typed field is there (a free-form dict's entry) or it does not convert (the field's
    own check names it)."""
    section, _, key = path.partition(".")
    try:  # a copy of the one section it sets (the whole schema's is 4 ms a value)
        node = copy.deepcopy(_schema()[section])
        OmegaConf.update(node, key, value, merge=False)
        return OmegaConf.select(node, key)
    except Exception:  # OmegaConf's validation errors: not this function's to report
        return value


def to_trial_config(node: DictConfig) -> TrialConfig:
    """Typed TrialConfig from a composed or loaded config (extra top-level keys ignored)."""
    schema = _schema()
    subset = OmegaConf.masked_copy(node, [k for k in TRIAL_KEYS if k in node])
    merged = OmegaConf.merge(schema, subset)
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, TrialConfig)
    if cfg.workload.entry:
        from trials.contract.mindformers import pin_workload_config

        pin_workload_config(cfg.workload)
    return cfg


def memory_budget_gib(cfg: TrialConfig) -> float:
    """Per-rank memory budget: the explicit guard, else the profile's device memory."""
    if cfg.guard.memory_budget_gib is not None:
        return float(cfg.guard.memory_budget_gib)
    return float(cfg.hardware.device_memory_gib)
