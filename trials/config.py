"""Typed schema of a trial's configuration (plain Python, no MindSpore).

Every knob autotune tunes is a field here, addressed by its override path
(``runtime.mode``, ``parallel.dp``, ``train.micro_batches`` ...). The YAML in
``conf/`` fills it in; OmegaConf checks types and enum values at compose time,
and :func:`validate` checks the rules that span fields.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import MISSING, DictConfig, OmegaConf

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the override to fix."""


class Mode(str, enum.Enum):
    graph = "graph"
    pynative = "pynative"


class JitLevel(str, enum.Enum):
    O0 = "O0"
    O1 = "O1"


class MemoryLevel(str, enum.Enum):
    O0 = "O0"
    O1 = "O1"


class DType(str, enum.Enum):
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


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


@dataclass
class WorkloadConfig:
    """The model being trained. ``entry`` selects a user workload instead of the GPT."""

    name: str = MISSING
    #: ``"package.module:factory"`` of a user workload (see README); empty = built-in GPT.
    entry: str = ""
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 2
    seq_len: int = 32
    #: Byte-level tokens: 256 symbols.
    vocab_size: int = 256
    #: Free-form options handed to a user workload's factory.
    options: dict = field(default_factory=dict)


@dataclass
class PrecisionConfig:
    """Compute dtype and how mixed precision is applied (``mindspore.amp``)."""

    name: str = "fp32"
    dtype: DType = DType.float32
    #: ``auto_mixed_precision`` level: O0 (none), O1, O2, O3 or auto.
    amp_level: str = "O0"
    loss_scale: LossScale = LossScale.none
    init_scale: float = 65536.0
    scale_factor: int = 2
    scale_window: int = 1000


@dataclass
class RuntimeConfig:
    """Execution: mode, jit level, memory optimisation, CPU threads."""

    mode: Mode = Mode.graph
    jit_level: JitLevel = JitLevel.O0
    memory_optimize_level: MemoryLevel = MemoryLevel.O0
    #: CPU operator threads (``device_context.cpu.op_tuning.threads_num``); 0 = default.
    threads: int = 0


@dataclass
class ParallelConfig:
    """The device split: data x model (tensor) x pipeline parallel."""

    dp: int = 1
    mp: int = 1
    pp: int = 1

    @property
    def devices(self) -> int:
        return self.dp * self.mp * self.pp


@dataclass
class TrainConfig:
    """Optimisation. ``global_batch`` stays fixed while the split changes."""

    global_batch: int = 8
    #: Gradient-accumulation steps (pp = 1) or pipeline micro-batch count (pp > 1).
    micro_batches: int = 1
    lr: float = 1e-3
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    #: Recompute each transformer block in the backward pass.
    recompute: bool = False
    seed: int = 1234


@dataclass
class DataConfig:
    """Input pipeline (``mindspore.dataset``)."""

    source: DataSource = DataSource.text
    #: Directory of text files; empty = the Python standard library's sources.
    text_dir: str = ""
    #: Cap on bytes indexed from text_dir (keeps start-up short).
    max_bytes: int = 8_000_000
    num_workers: int = 1
    multiprocessing: bool = False
    prefetch: int = 16
    #: Where MindRecord caches and the CPU peak calibration live; empty = ~/.cache/autotune.
    cache_dir: str = ""


@dataclass
class RunConfig:
    """What the process does: a short measured trial or a production run."""

    mode: RunMode = RunMode.trial
    #: Steps after the compile step that are not measured: on CPU, MindSpore's steps 1-4
    #: run ~30 % slower than later ones (bench/trial_repeatability.py).
    warmup_steps: int = 4
    measure_steps: int = 8
    #: Production mode: total optimizer steps.
    steps: int = 100
    checkpoint_every: int = 50
    keep_checkpoints: int = 3
    checkpoint_dir: str = "checkpoints"
    #: Production mode: continue from the latest checkpoint in checkpoint_dir.
    resume: bool = True
    metrics_path: str = "metrics.jsonl"


@dataclass
class GuardConfig:
    """Divergence and memory guards: the trial stops itself with an outcome."""

    #: Consecutive non-finite losses before the run counts as diverged.
    nonfinite_patience: int = 3
    #: A loss above this factor x the running median is a spike: no update, diverged.
    spike_factor: float = 8.0
    #: Steps before spike detection starts.
    spike_after_steps: int = 3
    #: Memory budget per rank in GiB; null = the hardware profile's device memory.
    memory_budget_gib: float | None = None
    #: Address-space limit = this factor x budget (thread stacks inflate virtual size).
    address_space_factor: float = 4.0


@dataclass
class HardwareConfig:
    """A hardware profile: what the backend offers and its peak FLOP/s."""

    name: str = MISSING
    backend: Backend = Backend.CPU
    #: Devices (or CPU worker processes) available to one job.
    devices: int = 1
    device_memory_gib: float = 8.0
    #: Peak TFLOP/s per dtype; null = calibrate on this machine (CPU).
    peak_tflops: dict = field(default_factory=dict)
    #: Knobs this backend can run: bf16, model_parallel, pipeline_parallel.
    supports: dict = field(default_factory=dict)


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


def micro_batch_size(cfg: TrialConfig) -> int:
    """Samples per rank per forward pass: global = size x micro_batches x dp."""
    return cfg.train.global_batch // (cfg.train.micro_batches * cfg.parallel.dp)


def accumulation_steps(cfg: TrialConfig) -> int:
    """Gradient accumulation steps (micro-batches go to the pipeline when pp > 1)."""
    return 1 if cfg.parallel.pp > 1 else cfg.train.micro_batches


def validate(cfg: TrialConfig) -> None:
    """Cross-field rules. Raises ConfigError naming the override to change."""
    p, t, w = cfg.parallel, cfg.train, cfg.workload
    for key, value in (("parallel.dp", p.dp), ("parallel.mp", p.mp), ("parallel.pp", p.pp),
                       ("train.micro_batches", t.micro_batches),
                       ("train.global_batch", t.global_batch)):
        if value < 1:
            raise ConfigError(f"{key}={value} must be >= 1")
    if t.global_batch % (t.micro_batches * p.dp):
        raise ConfigError(
            f"train.global_batch={t.global_batch} is not divisible by "
            f"train.micro_batches x parallel.dp = {t.micro_batches} x {p.dp}; "
            "change one of them")
    if p.pp > 1 and t.micro_batches < p.pp:
        raise ConfigError(f"train.micro_batches={t.micro_batches} must be >= parallel.pp={p.pp} "
                          "for pipeline parallel")
    if not w.entry:
        if w.d_model % w.n_heads:
            raise ConfigError(f"workload.d_model={w.d_model} is not divisible by "
                              f"workload.n_heads={w.n_heads}")
        if w.n_heads % p.mp:
            raise ConfigError(f"workload.n_heads={w.n_heads} is not divisible by "
                              f"parallel.mp={p.mp}")
        if w.n_layers % p.pp:
            raise ConfigError(f"workload.n_layers={w.n_layers} is not divisible by "
                              f"parallel.pp={p.pp}")
    if cfg.data.num_workers < 1:
        raise ConfigError(f"data.num_workers={cfg.data.num_workers} must be >= 1")
    if cfg.runtime.threads < 0:
        raise ConfigError(f"runtime.threads={cfg.runtime.threads} must be >= 0 (0 = default)")
    if cfg.run.measure_steps < 1 and cfg.run.mode is RunMode.trial:
        raise ConfigError("run.measure_steps must be >= 1")


def to_trial_config(node: DictConfig) -> TrialConfig:
    """Typed TrialConfig from a composed or loaded config (extra top-level keys ignored)."""
    schema = OmegaConf.structured(TrialConfig)
    subset = OmegaConf.masked_copy(node, [k for k in TRIAL_KEYS if k in node])
    merged = OmegaConf.merge(schema, subset)
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, TrialConfig)
    return cfg


def memory_budget_gib(cfg: TrialConfig) -> float:
    """Per-rank memory budget: the explicit guard, else the profile's device memory."""
    if cfg.guard.memory_budget_gib is not None:
        return float(cfg.guard.memory_budget_gib)
    return float(cfg.hardware.device_memory_gib)
