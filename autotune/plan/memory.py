"""Peak memory per device, one function per term, each checkable by hand.

The most loaded device is on the first pipeline stage: it holds the embedding, its
share of the layers, and the most micro-batches in flight under 1F1B. Terms in bytes:

- model states: 16 bytes per parameter for Adam (Rajbhandari et al., "ZeRO", SC'20,
  arXiv:1910.02054, section 3.1): mixed precision keeps 16-bit parameters 2 and
  gradients 2, and fp32 optimizer states 12 (master weights, momentum, variance); fp32
  training keeps parameters 4, gradients 4 and the two moments 8. Tensor parallel
  divides parameters by mp, pipeline parallel leaves L/pp layers, the parallel
  optimizer (MindSpore's, ZeRO-1) divides the optimizer states by dp.
- accumulation: an fp32 gradient accumulator (4 bytes a parameter) under gradient
  accumulation, only for a program that keeps one (ours: trials/step.py). Megatron-LM
  and DeepSpeed accumulate into the gradients themselves, and no gradient-sized
  communication buffer is counted (ZeRO's 16 bytes hold none).
- activations: Korthikanti et al. 2022, eq. 1-4 and Table 2, per layer and micro-batch;
  x micro-batches in flight; full recompute keeps only each layer's input.
- logits: the fp32 logits and their gradient on the last stage (4 s b V / mp bytes each).
- runtime overhead and the allocator factor: calibrated constants (calibration.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autotune.plan.layout import BYTES, Job, Recompute
from autotune.plan.model_dims import ModelDims, embedding_params, head_params, layer_params
from trials.contract.schema import DType

GIB = 1024**3


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device by term; ``peak_bytes`` applies the calibrated constants."""

    parameters: float
    gradients: float
    optimizer_states: float
    accumulation: float
    activations: float
    logits: float
    runtime_overhead: float
    allocator_factor: float
    activation_factor: float

    @property
    def states(self) -> float:
        return self.parameters + self.gradients + self.optimizer_states + self.accumulation

    @property
    def static(self) -> float:
        """What does not scale with the batch."""
        return self.states

    @property
    def dynamic(self) -> float:
        """What scales with the micro-batch (before the calibrated activation factor)."""
        return self.activations + self.logits

    @property
    def peak_bytes(self) -> float:
        return self.runtime_overhead + self.allocator_factor * (
            self.static + self.activation_factor * self.dynamic)

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / GIB

    def gib(self) -> dict[str, float]:
        """Every byte term in GiB, plus the total (for tables and records)."""
        out = {k: v / GIB for k, v in asdict(self).items()
               if k not in ("allocator_factor", "activation_factor")}
        out["peak"] = self.peak_gib
        return out

    def explain(self, budget_gib: float) -> str:
        """Why it does not fit, in the words of its biggest terms."""
        terms = {"activations": (self.dynamic * self.activation_factor),
                 "states": self.states, "runtime": self.runtime_overhead}
        parts = " + ".join(f"{name} {value / GIB:.1f} GiB"
                           for name, value in sorted(terms.items(), key=lambda kv: -kv[1])
                           if value / GIB >= 0.05)
        return f"{parts} (x{self.allocator_factor:g} allocator) > {budget_gib:g} GiB"


def stage_params(d: ModelDims, job: Job) -> float:
    """Parameters on one device of the first stage (the most loaded one)."""
    layers = d.layers // job.pp * layer_params(d)
    edges = embedding_params(d) + (head_params(d) if job.pp == 1 else 0)
    return (layers + edges) / job.mp


def mixed_precision(job: Job) -> bool:
    return job.dtype is not DType.float32


def parameter_bytes(d: ModelDims, job: Job) -> float:
    """[ZeRO 3.1] 2 bytes a parameter (16-bit) under mixed precision, 4 in fp32."""
    return stage_params(d, job) * BYTES[job.dtype]


def gradient_bytes(d: ModelDims, job: Job) -> float:
    """[ZeRO 3.1] gradients in the parameters' dtype: 2 bytes (16-bit) or 4 (fp32)."""
    return stage_params(d, job) * BYTES[job.dtype]


def optimizer_bytes(d: ModelDims, job: Job) -> float:
    """[ZeRO 3.1] Adam's states: 12 bytes under mixed precision (fp32 master weights,
    momentum and variance: K = 12), 8 in fp32 (the two moments); the parallel optimizer
    (ZeRO-1, P_os) splits them across dp."""
    per_param = 12 if mixed_precision(job) else 8
    return stage_params(d, job) * per_param / (job.dp if job.optimizer_shard else 1)


def accumulation_bytes(d: ModelDims, job: Job) -> float:
    """An fp32 gradient accumulator when micro-batches are accumulated (pp = 1), for a
    program that keeps one (trials/step.py's ``accum.*`` Parameters)."""
    if job.fp32_accumulator and job.accumulation > 1:
        return stage_params(d, job) * 4
    return 0.0


def activation_bytes_per_layer(d: ModelDims, job: Job) -> float:
    """Korthikanti et al. 2022, Table 2, for one layer and one micro-batch of b sequences:

    s b h (34 + 5 a s / h)              no parallelism (eq. 1)
    s b h (10 + 24/t + 5 a s / (h t))   tensor parallel (eq. 2)
    s b h (34/t + 5 a s / (h t))        tensor + sequence parallel (eq. 4)
    the same without 5 a s / (h t)      selective recompute (section 5)
    2 s b h                             full recompute (the layer input only)

    Their counts assume 16-bit activations (2 bytes an element, 1-byte dropout masks);
    an fp32 run stores twice as much. The MLP term (19 s b h at f = 4h) is rescaled for
    other feed-forward widths and for a gated MLP (three f-wide tensors instead of two).
    """
    s, b, h, a, t = d.seq, job.micro_batch_size, d.hidden, d.heads, job.mp
    width = d.ffn / h
    mlp_wide = (4 if d.gpt else 6) * width  # 16 s b h at f = 4h (fc output, GeLU input)
    attention_core = 0.0 if job.recompute is Recompute.selective else 5 * a * s / (h * t)
    if job.recompute is Recompute.full:
        coefficient = 2.0
    elif job.sequence_parallel:
        coefficient = (10 + mlp_wide + 8) / t + attention_core
    else:
        coefficient = 10 + (mlp_wide + 8) / t + attention_core
    return s * b * h * coefficient * job.element_bytes / 2


def micro_batches_in_flight(job: Job) -> int:
    """1F1B: the first stage holds min(m, p) micro-batches; without pipeline, one."""
    return min(job.micro_batches, job.pp) if job.pp > 1 else 1


def activation_bytes(d: ModelDims, job: Job) -> float:
    layers = d.layers // job.pp
    stored = layers * activation_bytes_per_layer(d, job) * micro_batches_in_flight(job)
    if job.recompute is Recompute.full:  # the backward rebuilds one layer at a time
        stored += activation_bytes_per_layer(
            d, Job(**{**asdict(job), "recompute": Recompute.none}))
    return stored


def logits_bytes(d: ModelDims, job: Job) -> float:
    """fp32 logits and their gradient on the last stage (4 s b V / t bytes each)."""
    if job.pp > 1:
        return 0.0  # the first stage (the peak) holds no logits
    return 2 * 4 * d.seq * job.micro_batch_size * d.vocab / job.mp


def breakdown(d: ModelDims, job: Job, *, runtime_overhead_gib: float, allocator_factor: float,
              activation_factor: float) -> MemoryBreakdown:
    return MemoryBreakdown(
        parameters=parameter_bytes(d, job), gradients=gradient_bytes(d, job),
        optimizer_states=optimizer_bytes(d, job), accumulation=accumulation_bytes(d, job),
        activations=activation_bytes(d, job), logits=logits_bytes(d, job),
        runtime_overhead=runtime_overhead_gib * GIB,
        allocator_factor=allocator_factor, activation_factor=activation_factor)
