"""Peak memory per device, one function per term, each checkable by hand.

The peak is the most loaded pipeline stage's: usually the first (the embedding, its share
of the layers, the most micro-batches in flight under 1F1B), the last when the logits or
an uneven split weigh more. Terms in bytes:

- model states: 16 bytes per parameter for Adam (Rajbhandari et al., "ZeRO", SC'20,
  arXiv:1910.02054, section 3.1): mixed precision keeps 16-bit parameters 2 and
  gradients 2, and fp32 optimizer states 12 (master weights, momentum, variance); fp32
  training keeps parameters 4, gradients 4 and the two moments 8. Tensor parallel
  divides parameters by mp, pipeline parallel leaves a stage its layers, and the shard
  level splits optimizer states (ZeRO-1, MindSpore's parallel optimizer), gradients
  (ZeRO-2) and parameters (ZeRO-3, FSDP) across dp.
- accumulation: an fp32 gradient accumulator (4 bytes a parameter) under gradient
  accumulation, only for a program that keeps one (ours: trials/step.py). Megatron-LM
  and DeepSpeed accumulate into the gradients themselves, and no gradient-sized
  communication buffer is counted (ZeRO's 16 bytes hold none).
- activations: Korthikanti et al. 2022, eq. 1-4 and Table 2, per layer and micro-batch;
  x micro-batches in flight; full recompute keeps only each layer's input.
- logits: the logits and their fp32 softmax on the last stage (2 + 4 bytes an element;
  12 under PyTorch's unfused cross entropy on fp32 logits).
- runtime overhead and the allocator factor: calibrated constants (calibration.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autotune.plan.layout import BYTES, Job, Recompute
from autotune.plan.model_dims import (
    ModelDims,
    embedding_params,
    head_params,
    layer_params,
    matmul_shapes,
)
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


def stage_layer_counts(d: ModelDims, job: Job) -> tuple[int, ...]:
    """Layers on each pipeline stage: the job's own split (MindSpore's ``offset``), else as
    even as they go, the extra layers on the last stages (the first holds the embedding and
    the most micro-batches in flight; BLOOM's 70 layers on 12 stages: 5 on the first two,
    6 on the other ten)."""
    if job.stage_layers is not None:
        return job.stage_layers
    base, extra = divmod(d.layers, job.pp)
    return tuple(base + (1 if i >= job.pp - extra else 0) for i in range(job.pp))


def offset_stage_layers(layers: int, offsets: list[int]) -> tuple[int, ...]:
    """MindSpore's ``pipeline_config``/``offset``: stage i holds L // p + offset[i] layers;
    the offsets must place every layer (sum(offset) = L - p x (L // p)) and leave each
    stage at least one."""
    p = len(offsets)
    counts = tuple(layers // p + o for o in offsets)
    if sum(counts) != layers or min(counts) < 1:
        raise ValueError(f"offset {offsets} puts {list(counts)} layers on the {p} stages; "
                         f"they must add up to the model's {layers} layers, each stage >= 1")
    return counts


def shard_ranks(job: Job) -> int:
    """The ranks a shard level splits states across: data parallel, and context parallel,
    whose ranks hold the same parameters (Megatron-LM's distributed optimizer uses dp x cp)."""
    return job.dp * job.context_parallel


def stage_params(d: ModelDims, job: Job, stage: int = 0) -> float:
    """Parameters on one device of a pipeline stage (its layers' share under mp). The first
    stage holds the embedding, the last the final norm and output projection; a tied
    output layer (gpt) keeps a copy of the embedding on the last stage (Megatron-LM's
    ``initialize_word_embeddings``)."""
    last = stage == job.pp - 1
    layers = stage_layer_counts(d, job)[stage] * layer_params(d)
    edges = (embedding_params(d) if stage == 0 else 0.0) + (head_params(d) if last else 0.0)
    if last and job.pp > 1 and d.gpt:
        edges += d.vocab * d.hidden
    return (layers + edges) / job.mp


def mixed_precision(job: Job) -> bool:
    return job.dtype is not DType.float32


def parameter_bytes(d: ModelDims, job: Job, stage: int = 0) -> float:
    """[ZeRO 3.1] 2 bytes a parameter (16-bit) under mixed precision, 4 in fp32. ZeRO-3
    (P_os+g+p, section 5.3) splits them across dp and gathers two layers' full
    parameters at a time (the one computing and the one prefetched: FSDP's
    ``forward_prefetch``, DeepSpeed's ``stage3_prefetch_bucket_size``). Over one rank
    (dp x cp = 1) nothing is split, so nothing is gathered."""
    per_param = BYTES[job.dtype]
    if job.shard_level < 3 or shard_ranks(job) == 1:
        return stage_params(d, job, stage) * per_param
    gathered = 2 * layer_params(d) / job.mp * per_param
    return stage_params(d, job, stage) * per_param / shard_ranks(job) + gathered


def gradient_bytes(d: ModelDims, job: Job, stage: int = 0) -> float:
    """[ZeRO 3.1] gradients in the parameters' dtype: 2 bytes (16-bit) or 4 (fp32); 4 for
    bf16 parameters with fp32 main grads (Megatron-LM), 6 where the bf16 ones are kept
    beside them (DeepSpeed's BF16_Optimizer, ``Job.keeps_16bit_grads``); split across dp
    from ZeRO-2 (P_os+g, section 5.2) on."""
    per_param = 4 if job.fp32_main_grads and job.dtype is DType.bfloat16 else BYTES[job.dtype]
    if job.keeps_16bit_grads and job.fp32_main_grads and mixed_precision(job):
        per_param += BYTES[job.dtype]
    split = shard_ranks(job) if job.shard_level >= 2 else 1
    return stage_params(d, job, stage) * per_param / split


def optimizer_bytes(d: ModelDims, job: Job, stage: int = 0) -> float:
    """[ZeRO 3.1] Adam's states: 12 bytes under mixed precision (fp32 master weights,
    momentum and variance: K = 12), 8 in fp32 (the two moments), 16 for fp16 with fp32
    main grads (Megatron-LM's fp32 copy of the fp16 grads); every shard level (ZeRO-1,
    P_os, on) splits them across dp."""
    per_param = 12 if mixed_precision(job) else 8
    if job.fp32_main_grads and job.dtype is DType.float16:
        per_param += 4
    split = shard_ranks(job) if job.shard_level >= 1 else 1
    return stage_params(d, job, stage) * per_param / split


def accumulation_bytes(d: ModelDims, job: Job, stage: int = 0) -> float:
    """An fp32 gradient accumulator when micro-batches are accumulated (pp = 1), for a
    program that keeps one (trials/step.py's ``accum.*`` Parameters)."""
    if job.fp32_accumulator and job.accumulation > 1:
        return stage_params(d, job, stage) * 4
    return 0.0


def local_seq(d: ModelDims, job: Job) -> float:
    """Tokens of one sequence on one rank: context parallel splits the sequence."""
    return d.seq / job.context_parallel


def activation_bytes_per_layer(d: ModelDims, job: Job) -> float:
    """Korthikanti et al. 2022, Table 2, for one layer and one micro-batch of b sequences:

    s b h (34 + 5 a s / h)              no parallelism (eq. 1)
    s b h (10 + 24/t + 5 a s / (h t))   tensor parallel (eq. 2)
    s b h (34/t + 5 a s / (h t))        tensor + sequence parallel (eq. 4)
    the same without 5 a s / (h t)      selective recompute (section 5), or an attention
                                        that never stores the scores (FlashAttention)
    2 s b h, 2 s b h / t under SP       full recompute (the layer input only, section 4.1)

    Their counts assume 16-bit activations (2 bytes an element, 1-byte dropout masks);
    an fp32 run stores twice as much. Of the 24/t: Q and K 4, V 2, the output projection's
    input 2, the MLP 16. Under grouped-query attention K and V are kv_heads / heads as wide
    (Q, K and V: 2 + 4 g with g = kv_heads / heads; 6 at g = 1). The MLP term is rescaled
    for other feed-forward widths and for a gated MLP (SwiGLU: three f-wide tensors
    instead of two). Context parallel stores 1 / cp of the sequence (s is the local one).
    """
    s, b, h, a, t = local_seq(d, job), job.micro_batch_size, d.hidden, d.heads, job.mp
    width = d.ffn / h
    mlp_wide = (4 if d.gpt else 6) * width  # 16 s b h at f = 4h (fc output, GeLU input)
    qkv_and_projection = 2 + 4 * d.kv_heads / d.heads + 2
    scores_stored = not (job.recompute in (Recompute.selective, Recompute.selective_op)
                         or job.flash_attention)
    attention_core = 5 * a * s / (h * t) if scores_stored else 0.0
    tensor_parallel = mlp_wide + qkv_and_projection
    if job.recompute is Recompute.full:
        coefficient = 2.0 / t if job.sequence_parallel else 2.0
    elif job.recompute is Recompute.selective_op:
        coefficient = selective_op_coefficient(d, job)
    elif job.sequence_parallel:
        coefficient = (10 + tensor_parallel) / t + attention_core
    else:
        coefficient = 10 + tensor_parallel / t + attention_core
    return s * b * h * coefficient * job.element_bytes / 2


def selective_op_coefficient(d: ModelDims, job: Job) -> float:
    """What selective op recompute keeps of a layer, in the units of Korthikanti's Table 2
    (bytes at 16 bits / s b h): the layer input (2, / t under SP), every other matmul's
    output (the 1st, 3rd, ...: 2 x its width / h, split by t), and the attention output
    (2 / t; FlashAttention's log-sum-exp is a fraction of it and left out). Element-wise
    outputs (norms, activations, the gating product) are recomputed. Derived from
    torchtitan's policy (``_save_list``: mm and SDPA outputs, every second mm recomputed)."""
    h, t = d.hidden, job.mp
    layer_input = 2.0 / t if job.sequence_parallel else 2.0
    kept = sum(2.0 * out / h for _, out in matmul_shapes(d)[0::2])
    return layer_input + (kept + 2.0) / t


def micro_batches_in_flight(job: Job, stage: int = 0) -> float:
    """Micro-batches (in units of a whole stage's layers) whose activations a stage holds
    at its peak. 1F1B: stage i holds min(m, p - i). Interleaved 1F1B with v chunks: stage i
    warms up with 2 (p - i - 1) + (v - 1) p chunk-micro-batches (Megatron-LM's
    ``forward_backward_pipelining_with_interleaving``), plus the one in flight, each 1 / v
    of the stage: p + (p - 1) / v on the first stage, Korthikanti et al. 2022 eq. 5's
    factor 1 + (p - 1) / (p v). Without pipeline, one."""
    if job.pp == 1:
        return 1
    if job.virtual_stages == 1:
        return min(job.micro_batches, job.pp - stage)
    chunks = 2 * (job.pp - stage - 1) + (job.virtual_stages - 1) * job.pp + 1
    return min(float(job.micro_batches), chunks / job.virtual_stages)


def activation_bytes(d: ModelDims, job: Job, stage: int = 0) -> float:
    layers = stage_layer_counts(d, job)[stage]
    stored = layers * activation_bytes_per_layer(d, job) * micro_batches_in_flight(job, stage)
    if job.recompute is Recompute.full:  # the backward rebuilds one layer at a time
        stored += activation_bytes_per_layer(
            d, Job(**{**asdict(job), "recompute": Recompute.none}))
    return stored


#: Bytes an element of the logits that PyTorch's unfused cross entropy on an fp32 upcast
#: holds at its peak, the log-softmax's backward: the saved log-softmax output, its
#: incoming gradient (nll_loss's, dense) and the gradient it returns, 4 bytes each (its
#: backward is grad - exp(output) x sum(grad)); torchtitan frees the 16-bit logits before
#: the backward (``del pred``, train.py @eaea6f6) and the fp32 upcast is not saved.
UNFUSED_CROSS_ENTROPY_BYTES = 3 * 4


def logits_bytes(d: ModelDims, job: Job, stage: int = 0) -> float:
    """The logits on the last stage: the output layer's in the compute dtype and their fp32
    softmax, which the backward turns into the gradient in place (Megatron-LM's
    ``vocab_parallel_cross_entropy`` upcasts the logits and saves the softmax; 2 + 4 bytes
    an element of s b V / t, 4 + 4 in fp32); 12 under an unfused cross entropy
    (``UNFUSED_CROSS_ENTROPY_BYTES``)."""
    if stage != job.pp - 1:
        return 0.0
    per_element = (UNFUSED_CROSS_ENTROPY_BYTES if job.unfused_cross_entropy
                   else job.element_bytes + 4)
    return per_element * local_seq(d, job) * job.micro_batch_size * d.vocab / job.mp


def stage_breakdown(d: ModelDims, job: Job, stage: int, *, runtime_overhead_gib: float,
                    allocator_factor: float, activation_factor: float) -> MemoryBreakdown:
    return MemoryBreakdown(
        parameters=parameter_bytes(d, job, stage), gradients=gradient_bytes(d, job, stage),
        optimizer_states=optimizer_bytes(d, job, stage),
        accumulation=accumulation_bytes(d, job, stage),
        activations=activation_bytes(d, job, stage), logits=logits_bytes(d, job, stage),
        runtime_overhead=runtime_overhead_gib * GIB,
        allocator_factor=allocator_factor, activation_factor=activation_factor)


def breakdown(d: ModelDims, job: Job, *, runtime_overhead_gib: float, allocator_factor: float,
              activation_factor: float) -> MemoryBreakdown:
    """The most loaded stage's terms (the stage with the highest peak)."""
    stages = [stage_breakdown(d, job, i, runtime_overhead_gib=runtime_overhead_gib,
                              allocator_factor=allocator_factor,
                              activation_factor=activation_factor) for i in range(job.pp)]
    return max(stages, key=lambda b: b.peak_bytes)
