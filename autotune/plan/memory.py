"""Peak memory per device, one function per term, each checkable by hand.

The most loaded device is on the first pipeline stage: it holds the embedding, its
share of the layers, and the most micro-batches in flight under 1F1B. Terms in bytes:

- model states: fp32 master weights 4, fp32 gradients 4, Adam moments 8 bytes per
  parameter (Rajbhandari et al. 2020, section 3.1: 16 bytes per parameter for mixed-
  precision Adam); a 16-bit compute copy 2 more when the dtype is not fp32; an fp32
  accumulation buffer 4 more under gradient accumulation. Tensor parallel divides
  parameters by mp, pipeline parallel leaves L/pp layers, MindSpore's parallel
  optimizer divides the master weights and Adam moments by dp (gradients stay fp32
  and whole: MindSpore keeps gradients in the parameters' dtype).
- activations: Korthikanti et al. 2022, eq. 1-4 and Table 2, per layer and micro-batch;
  x micro-batches in flight; full recompute keeps only each layer's input.
- logits: the fp32 logits and their gradient on the last stage (4 s b V / mp bytes each).
- communication buffer: a gradient-sized fusion buffer when dp > 1.
- runtime overhead and the allocator factor: calibrated constants (calibration.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autotune.plan.layout import Job, Recompute
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
    comm_buffer: float
    runtime_overhead: float
    allocator_factor: float
    activation_factor: float

    @property
    def states(self) -> float:
        return self.parameters + self.gradients + self.optimizer_states + self.accumulation

    @property
    def static(self) -> float:
        """What does not scale with the batch."""
        return self.states + self.comm_buffer

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
                 "states": self.states, "buffers": self.comm_buffer,
                 "runtime": self.runtime_overhead}
        parts = " + ".join(f"{name} {value / GIB:.1f} GiB"
                           for name, value in sorted(terms.items(), key=lambda kv: -kv[1])
                           if value / GIB >= 0.05)
        return f"{parts} (x{self.allocator_factor:g} allocator) > {budget_gib:g} GiB"


def stage_params(d: ModelDims, job: Job) -> float:
    """Parameters on one device of the first stage (the most loaded one)."""
    layers = d.layers // job.pp * layer_params(d)
    edges = embedding_params(d) + (head_params(d) if job.pp == 1 else 0)
    return (layers + edges) / job.mp


def parameter_bytes(d: ModelDims, job: Job) -> float:
    """fp32 master weights (split across dp by the parallel optimizer, as ZeRO-1 splits
    them), plus a whole 16-bit compute copy under mixed precision."""
    master = 4 / (job.dp if job.optimizer_shard else 1)
    copy = 0 if job.dtype is DType.float32 else 2
    return stage_params(d, job) * (master + copy)


def gradient_bytes(d: ModelDims, job: Job) -> float:
    return stage_params(d, job) * 4


def optimizer_bytes(d: ModelDims, job: Job) -> float:
    """Adam's two fp32 moments, split across dp by the parallel optimizer."""
    return stage_params(d, job) * 8 / (job.dp if job.optimizer_shard else 1)


def accumulation_bytes(d: ModelDims, job: Job) -> float:
    """An fp32 gradient accumulator when micro-batches are accumulated (pp = 1)."""
    return stage_params(d, job) * 4 if job.accumulation > 1 else 0.0


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


def comm_buffer_bytes(d: ModelDims, job: Job) -> float:
    """The fused gradient buffer of the data-parallel all-reduce."""
    return gradient_bytes(d, job) if job.dp > 1 else 0.0


def breakdown(d: ModelDims, job: Job, *, runtime_overhead_gib: float, allocator_factor: float,
              activation_factor: float) -> MemoryBreakdown:
    return MemoryBreakdown(
        parameters=parameter_bytes(d, job), gradients=gradient_bytes(d, job),
        optimizer_states=optimizer_bytes(d, job), accumulation=accumulation_bytes(d, job),
        activations=activation_bytes(d, job), logits=logits_bytes(d, job),
        comm_buffer=comm_buffer_bytes(d, job), runtime_overhead=runtime_overhead_gib * GIB,
        allocator_factor=allocator_factor, activation_factor=activation_factor)
