"""Step time per optimizer step, one function per term, each checkable by hand.

    step = overhead + data wait
         + (compute + layer latency + memory-bound work + tensor/context-parallel
            collectives) x (1 + (p - 1) / (v m))
         + pipeline point-to-point sends + exposed data-parallel gradient reduction

(the factor 1 + (p - 1) / (v m) is the pipeline bubble)

- compute: the slowest stage's GEMMs (forward, backward, any recompute forward, and the
  logits on the last stage) at the roofline of the device's peak FLOP/s, wave-quantised
  on its compute units (kernels.py), over one fitted compute efficiency per dtype, each
  GEMM at least a fitted floor (the host's time to issue the next kernel);
- layer latency: a fixed time per layer and micro-batch that scales neither with FLOPs
  nor with bytes (kernel launches, host work), a calibrated constant per execution
  mode (PyNative dispatches every op from Python); on the CPU backend host work (it and
  the step overhead) stretches when the ranks' threads outnumber the cores;
- memory-bound work: the kernels that move bytes rather than multiply (norms, the MLP's
  activation, residual adds, rotary embeddings, the attention softmax over the s x s
  scores unless FlashAttention keeps them on chip) at the roofline of the device's
  memory bandwidth: their bytes over the datasheet's bandwidth, no fitted constant
  (what kernels fall short of it is in the fitted layer latency);
- collectives: an all-reduce of n bytes over g ranks moves 2 (g-1)/g n bytes per
  rank at its bus bandwidth (a switch's port, or g - 1 links of a full mesh, each at
  what its collective library achieves: the line rate x the link's measured
  ``achieved_fraction``) x a calibrated collective efficiency (at most 1: no fit may make
  a collective faster than its library's benchmark on its links), plus a latency per
  step (2 (g-1) for a ring, 2 for a mesh). A group that spans nodes reduces
  hierarchically (inside each node, then across nodes over every GPU's own link).
  Tensor and data parallel have an efficiency each: their collectives differ in size,
  dtype, and in how much of them the framework overlaps;
- tensor parallel: 2 all-reduces of s b h activations in the forward and 2 in the
  backward of every layer and micro-batch (Megatron-LM's f/g operators), 2 more when
  the forward is recomputed (reduce-scatter + all-gather under sequence parallel: the
  same volume);
- context parallel: ring attention passes every rank's K and V around the cp ranks in
  the forward, K, V and their gradients in the backward;
- pipeline bubble: (p - 1) / (v m + p - 1) of the pipelined time is idle (Narayanan et al.
  2021, section 2.2; v = 1 for plain 1F1B), i.e. a factor (v m + p - 1) / (v m);
- data parallel: one all-reduce of the stage's gradients (in fp32 or the compute dtype),
  or under sharding a reduce-scatter of them and all-gathers of the parameters in the
  compute dtype (one under ZeRO-1 and -2, two under ZeRO-3), exposed in full, or only the
  part that outlasts the backward when it is bucketed and overlapped.

Which link a group uses follows Megatron's rank order (mp fastest, then cp, dp, pp):
a group stays inside a node while its span fits the node's devices.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

from autotune.plan import kernels
from autotune.plan.layout import Cluster, Job, Recompute, host_contention
from autotune.plan.memory import local_seq, shard_ranks, stage_layer_counts, stage_params
from autotune.plan.model_dims import ModelDims
from trials.contract.schema import LinkConfig

FP32_BYTES = 4
#: The recompute modes that run the attention again in the backward (selective op keeps
#: the attention's output).
RECOMPUTES_ATTENTION = (Recompute.full, Recompute.selective)


@dataclass(frozen=True)
class TimeBreakdown:
    """Seconds per optimizer step by term."""

    compute: float
    recompute: float  # the part of compute that is the extra forward (already in compute)
    layer_latency: float
    memory_bound: float
    mp_collectives: float
    cp_collectives: float
    pp_bubble: float
    pp_p2p: float
    dp_allreduce: float
    data_wait: float
    overhead: float

    @property
    def step_s(self) -> float:
        return (self.compute + self.layer_latency + self.memory_bound
                + self.mp_collectives + self.cp_collectives + self.pp_bubble
                + self.pp_p2p + self.dp_allreduce + self.data_wait + self.overhead)

    @property
    def communication(self) -> float:
        return self.mp_collectives + self.cp_collectives + self.pp_p2p + self.dp_allreduce

    def seconds(self) -> dict[str, float]:
        return {**asdict(self), "step": self.step_s}


def level_allreduce_s(n_bytes: float, ranks: int, link: LinkConfig,
                      collective_efficiency: float) -> float:
    """All-reduce of n bytes over ``ranks`` devices on one level: 2 (g-1)/g n bytes per
    device at the bus bandwidth (``LinkConfig.bus_bandwidth_gbs``: a switch's port, or g - 1
    links of a full mesh, each at what its library achieves) x a calibrated efficiency,
    plus the latency of each step: a ring's reduce-scatter and all-gather take g - 1 steps
    each, a full mesh's one each (every peer reached directly)."""
    if ranks <= 1 or n_bytes <= 0:
        return 0.0
    bandwidth = link.bus_bandwidth_gbs(ranks) * 1e9 * collective_efficiency
    steps = 1 if link.full_mesh else ranks - 1
    return 2 * (ranks - 1) / ranks * n_bytes / bandwidth + 2 * steps * link.latency_us * 1e-6


def group_layout(ranks: int, stride: int, cluster: Cluster) -> tuple[int, int]:
    """(ranks of the group inside one node, nodes it spans) for a group of ``ranks`` ranks
    ``stride`` apart in Megatron's rank order."""
    if cluster.nodes == 1 or ranks * stride <= cluster.devices_per_node:
        return ranks, 1
    in_node = max(1, min(ranks, cluster.devices_per_node // stride))
    return in_node, math.ceil(ranks / in_node)


def allreduce_s(n_bytes: float, ranks: int, stride: int, cluster: Cluster,
                collective_efficiency: float) -> float:
    """All-reduce of n bytes over a group: one level inside a node; across nodes the
    hierarchical form NCCL and HCCL use (reduce-scatter inside each node, all-reduce of
    the 1/g shards across nodes, every GPU over its own inter-node link, all-gather inside
    each node). Its intra-node part moves what the g local ranks' all-reduce moves (a ring,
    or a full mesh's), its inter-node part what a ring of the N nodes moves on n / g bytes
    (NCCL's tree/ring choice is not modelled)."""
    in_node, nodes = group_layout(ranks, stride, cluster)
    hw = cluster.hardware
    if nodes == 1:
        return level_allreduce_s(n_bytes, ranks, hw.intra_node, collective_efficiency)
    return (level_allreduce_s(n_bytes, in_node, hw.intra_node, collective_efficiency)
            + level_allreduce_s(n_bytes / in_node, nodes, hw.inter_node,
                                collective_efficiency))


def link_for_span(span: int, cluster: Cluster) -> LinkConfig:
    """The link a group of consecutive ranks ``span`` wide crosses."""
    if cluster.nodes > 1 and span > cluster.devices_per_node:
        return cluster.hardware.inter_node
    return cluster.hardware.intra_node


def compute_s(d: ModelDims, job: Job, cluster: Cluster, peak_flops: float,
              efficiency: float = 1.0, floor_s: float = 0.0) -> tuple[float, float]:
    """(seconds of the slowest stage's GEMMs per step, of which the recompute forward):
    every block's GEMMs (kernels.block_gemms) and the logits on the last stage,
    wave-quantised on the profile's compute units, at ``efficiency`` x the roofline, each
    at least ``floor_s`` (kernels.py: a GEMM shorter than the host takes to issue
    the next leaves the device waiting), for m micro-batches. The pipeline runs at the
    pace of its slowest stage: an uneven split or the logits make one stage longer than
    L / p layers' worth."""
    scaled, floored, again_scaled, again_floored = compute_parts(
        d, job, cluster, peak_flops, efficiency, floor_s)
    return (scaled / efficiency + floored, again_scaled / efficiency + again_floored)


def compute_parts(d: ModelDims, job: Job, cluster: Cluster, peak_flops: float,
                  efficiency: float, floor_s: float) -> tuple[float, float, float, float]:
    """The slowest stage's GEMM seconds per step in two parts, for a fit that is linear in
    1 / efficiency: (roofline seconds of the GEMMs above the floor at ``efficiency``,
    seconds of the floors of the ones below it), and the same two for the recompute
    forward alone."""
    every, again, logits = _stage_gemm_seconds(d, job, cluster.hardware.compute_units,
                                               peak_flops)

    def split(times: tuple[float, ...]) -> tuple[float, float]:
        above = sum(t for t in times if t / efficiency >= floor_s)
        return above, floor_s * sum(1 for t in times if t / efficiency < floor_s)

    block, block_again, head = split(every), split(again), split(logits)
    stages = []
    for i, n in enumerate(stage_layer_counts(d, job)):
        last = i == job.pp - 1
        parts = (n * block[0] + (head[0] if last else 0.0),
                 n * block[1] + (head[1] if last else 0.0),
                 n * block_again[0], n * block_again[1])
        stages.append((parts[0] / efficiency + parts[1], parts))
    _, slowest = max(stages)
    return tuple(x * job.micro_batches for x in slowest)


@functools.lru_cache(maxsize=1 << 16)
def _stage_gemm_seconds(d: ModelDims, job: Job, units: int | None, peak_flops: float
                        ) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Roofline seconds of each GEMM of one block and micro-batch (all of them; the
    recompute forward's), and of the logits' (kernels.roofline_flops over the peak)."""
    def seconds(gemms: list[kernels.Gemm]) -> tuple[float, ...]:
        return tuple(kernels.roofline_flops(g, units) / peak_flops for g in gemms)

    every, again = kernels.block_gemms(d, job)
    return seconds(every), seconds(again), seconds(kernels.logits_gemms(d, job))


def stage_layers_max(d: ModelDims, job: Job) -> int:
    return max(stage_layer_counts(d, job))


def layer_latency_term_s(d: ModelDims, job: Job, per_layer_s: float,
                         contention: float = 1.0) -> float:
    """Fixed seconds per layer and micro-batch (forward, backward and any recompute
    forward together), times the slowest stage's layers and m micro-batches.

    Source: a derived number. On the vTrain landscape (bench/data/vtrain_single.csv:
    Megatron-DeepSpeed, fp16, full recompute, A100) measured / predicted time rose with the
    micro-batch count (0.91x at m = 2, 1.65x at 8, 2.36x at 16) while the FLOPs stayed the
    same; a least-squares fit gave ~2.7 ms per layer and micro-batch, ~59 % of the measured
    time, ~2.4 ms once the memory-bound kernels' bytes are charged apart
    (memory_bound_s), and ~1.2 ms beside a 75 us floor under every GEMM (kernels.py: the
    rest of the host time, which a per-layer constant charged to large GEMMs in full, is
    the floor's, hidden where the GEMMs outlast it). Every vTrain row is full recompute, so
    how the constant splits between the passes is not identified: it is fitted per
    hardware profile (calibration.py). The profiles' prior is 0: 2.7 ms as the A100 prior
    made the uncalibrated Megatron-LM points (N21, K22: large models, fused kernels) 15-20
    points worse. PyNative has its own
    constant (every op dispatched from Python); on the CPU backend host work stretches
    by ``layout.host_contention``.
    """
    return stage_layers_max(d, job) * job.micro_batches * per_layer_s * contention


def attention_passes(job: Job) -> int:
    """Passes over the attention per layer and micro-batch: forward, backward (counted as
    two), and the recompute forward of the modes that run the attention again."""
    return 3 + (1 if job.recompute in RECOMPUTES_ATTENTION else 0)


def score_elements(d: ModelDims, job: Job) -> float:
    """Attention-score elements one device writes per step, counted once per pass over them
    (forward, backward, and the recompute forward under full or selective recompute):
    b x (a / t) x s_local x s per layer and micro-batch. None under FlashAttention, which
    keeps the scores in on-chip memory (Dao et al. 2022, section 3.1)."""
    if job.flash_attention:
        return 0.0
    passes = attention_passes(job)
    per_layer = (job.micro_batch_size * d.heads / job.mp * local_seq(d, job) * d.seq)
    return stage_layers_max(d, job) * job.micro_batches * per_layer * passes


def elementwise_per_token(d: ModelDims, job: Job) -> float:
    """Elements one block's memory-bound kernels read and write per token on one device in
    one forward pass (Megatron-LM's fused kernels, Shoeybi et al. 2019; Korthikanti et al.
    2022, section 4.2 for what sequence parallel splits):

    - the two norms read and write h each, the two residual adds (the bias and dropout fused
      into them) read 2 h and write h each: 10 h, split over the t tensor ranks only under
      sequence parallel (else every rank runs them on the whole hidden state);
    - the MLP's activation, split over t: GeLU reads and writes f (2 f); SwiGLU reads the
      gate and the up projection and writes f (3 f);
    - llama's rotary embedding reads and writes Q and K (h + kv heads x head dim), over t.
    """
    t = job.mp
    hidden = 10 * d.hidden / (t if job.sequence_parallel else 1)
    if d.gpt:
        return hidden + 2 * d.ffn / t
    return hidden + (3 * d.ffn + 2 * (d.hidden + d.kv_heads * d.head_dim)) / t


#: Elements read and written per attention-score element and pass: the fused scale, mask
#: and softmax read the scores and write the probabilities (dropout on them, where a model
#: has it, is not counted: a lower bound).
SCORE_ELEMENT_TRAFFIC = 2


def memory_bound_bytes(d: ModelDims, job: Job) -> float:
    """Bytes the slowest stage's memory-bound kernels move per step: the element-wise
    traffic of every layer and micro-batch in each pass over it (the backward reads the
    output's gradient and the saved input and writes the input's gradient: twice a
    forward's traffic; full recompute runs the forward again), and the attention
    scores' (score_elements)."""
    passes = 3 + (1 if job.recompute is Recompute.full else 0)
    tokens = job.micro_batch_size * local_seq(d, job)
    elementwise = (stage_layers_max(d, job) * job.micro_batches * tokens
                   * elementwise_per_token(d, job) * passes)
    return (elementwise + score_elements(d, job) * SCORE_ELEMENT_TRAFFIC) * job.element_bytes


def memory_bound_s(d: ModelDims, job: Job, cluster: Cluster) -> float:
    """Seconds of the memory-bound kernels at the roofline of the device's memory
    bandwidth (its datasheet's): bytes / bandwidth; 0 where the profile does not state
    one (the CPU, whose fitted layer latency carries them)."""
    bandwidth = cluster.hardware.memory_bandwidth_gbs
    return memory_bound_bytes(d, job) / (bandwidth * 1e9) if bandwidth else 0.0


def mp_collectives_s(d: ModelDims, job: Job, cluster: Cluster,
                     collective_efficiency: float) -> float:
    if job.mp == 1:
        return 0.0
    per_call = local_seq(d, job) * job.micro_batch_size * d.hidden * job.element_bytes
    calls = stage_layers_max(d, job) * job.micro_batches * (
        6 if job.recompute is Recompute.full else 4)
    return calls * allreduce_s(per_call, job.mp, 1, cluster, collective_efficiency)


def cp_collectives_s(d: ModelDims, job: Job, cluster: Cluster,
                     collective_efficiency: float) -> float:
    """Ring attention (Liu et al. 2023; Megatron-LM's context parallel): each rank passes its
    K and V (2 x s_local b kv_heads head_dim / t elements) to the next cp - 1 times in the
    forward, and K, V and their gradients in the backward (twice that), per layer and
    micro-batch, plus a recompute forward's worth. Charged in full: the overlap with the
    attention blocks is left to the fitted efficiency."""
    cp = job.context_parallel
    if cp == 1:
        return 0.0
    kv = 2 * local_seq(d, job) * job.micro_batch_size * d.kv_heads * d.head_dim / job.mp
    passes = attention_passes(job)
    hop = kv * job.element_bytes
    in_node, nodes = group_layout(cp, job.mp, cluster)
    link = cluster.hardware.intra_node if nodes == 1 else cluster.hardware.inter_node
    per_hop = hop / (link.achieved_gbs * 1e9 * collective_efficiency) + link.latency_us * 1e-6
    return stage_layers_max(d, job) * job.micro_batches * passes * (cp - 1) * per_hop


def bubble_fraction(job: Job) -> float:
    """Idle share of the pipelined time: (p - 1) / (v m + p - 1)."""
    if job.pp == 1:
        return 0.0
    return (job.pp - 1) / (job.virtual_stages * job.micro_batches + job.pp - 1)


def pp_p2p_s(d: ModelDims, job: Job, cluster: Cluster) -> float:
    """Activations forward and gradients backward across one stage boundary, per
    micro-batch and model chunk (sequential in the critical path of the first and last
    stages; interleaving sends v times as often)."""
    if job.pp == 1:
        return 0.0
    size = local_seq(d, job) * job.micro_batch_size * d.hidden * job.element_bytes / (
        job.mp if job.sequence_parallel else 1)
    link = link_for_span(job.mp * job.context_parallel * job.dp + 1, cluster)
    per_send = size / (link.achieved_gbs * 1e9) + link.latency_us * 1e-6
    return 2 * job.micro_batches * job.virtual_stages * per_send


#: Megatron-LM's default gradient bucket (``--ddp-bucket-size``: max(40M, 1M x dp)
#: parameters, megatron/core/distributed/distributed_data_parallel.py): under overlap the
#: last bucket's reduction is what always remains after the backward.
GRADIENT_BUCKET_PARAMS = 40e6


def dp_reduction_bytes(d: ModelDims, job: Job) -> float:
    """Bytes of the slowest stage's data-parallel communication per step, as an all-reduce
    of that many bytes (``allreduce_s`` moves 2 (g-1)/g of them per rank). Without
    sharding, one all-reduce of the gradients in the reduction dtype (fp32 or the compute
    dtype). Sharded, each collective moves its own tensor in its own dtype (Rajbhandari et
    al. 2020, section 7.2: a reduce-scatter of the gradients and an all-gather of the
    updated parameters under ZeRO-1 and -2; under ZeRO-3 the parameters gathered in the
    forward and again in the backward): a reduce-scatter or an all-gather is half an
    all-reduce, the gradients in the reduction dtype, the parameters in the compute dtype
    they are used in (FSDP's ``param_dtype`` beside its ``reduce_dtype``; Megatron-LM's
    distributed optimizer gathers its 16-bit parameters; MindSpore's parallel optimizer
    puts its AllGather after the parameter's fp32 -> fp16 Cast, or casts first "for saving
    communication": ``InsertAllGatherAfterCast``, ``FindChildCastWithFP32ToFP16`` in
    ``frontend/parallel/step_parallel.cc``). With both in 16 bits ZeRO-3 is 1.5x an
    all-reduce, the paper's figure; with fp32 gradients it is 1x, not 1.5x an fp32
    all-reduce."""
    reduce_bytes = FP32_BYTES if job.reduce_in_fp32 else job.element_bytes
    params = max(stage_params(d, job, i) for i in range(job.pp))
    if job.shard_level == 0:
        return params * reduce_bytes
    gathers = 2 if job.shard_level >= 3 else 1
    return params * (reduce_bytes + gathers * job.element_bytes) / 2


def exposed_reduction_s(reduction_s: float, backward_s: float, job: Job,
                        stage_parameters: float) -> float:
    """What of the data-parallel reduction the step waits for. Not overlapped: all of it.
    Bucketed and overlapped with the backward: what outlasts the backward, and at least
    the last bucket's share (it starts only when the backward ends)."""
    if not job.overlap_grad_reduce:
        return reduction_s
    last_bucket = min(1.0, GRADIENT_BUCKET_PARAMS / max(stage_parameters, 1.0))
    return max(reduction_s - backward_s, reduction_s * last_bucket)


def dp_allreduce_s(d: ModelDims, job: Job, cluster: Cluster,
                   collective_efficiency: float, backward_s: float = 0.0) -> float:
    """The exposed data-parallel communication (dp_reduction_bytes: an all-reduce, or a
    shard level's reduce-scatter and all-gathers), over the dp x cp ranks that hold the
    same parameters."""
    reduction = allreduce_s(dp_reduction_bytes(d, job), shard_ranks(job),
                            job.mp, cluster, collective_efficiency)
    params = max(stage_params(d, job, i) for i in range(job.pp))
    return exposed_reduction_s(reduction, backward_s, job, params)


def breakdown(d: ModelDims, job: Job, cluster: Cluster, *, peak_flops: float,
              compute_efficiency: float, mp_collective_efficiency: float,
              dp_collective_efficiency: float, layer_latency_s: float,
              step_overhead_s: float, data_wait_s: float = 0.0,
              kernel_floor_s: float = 0.0) -> TimeBreakdown:
    compute, recompute = compute_s(d, job, cluster, peak_flops, compute_efficiency,
                                   kernel_floor_s)
    contention = host_contention(job, cluster)
    latency = layer_latency_term_s(d, job, layer_latency_s, contention)
    memory_bound = memory_bound_s(d, job, cluster)
    mp = mp_collectives_s(d, job, cluster, mp_collective_efficiency)
    cp = cp_collectives_s(d, job, cluster, mp_collective_efficiency)
    busy = compute + latency + memory_bound + mp + cp
    # The backward (2 of the 3 passes, beside any recompute) is what a bucketed reduction
    # can hide under.
    backward = (compute - recompute) * 2 / 3
    return TimeBreakdown(
        compute=compute, recompute=recompute, layer_latency=latency,
        memory_bound=memory_bound, mp_collectives=mp, cp_collectives=cp,
        # Idle share f of the pipelined time adds f / (1 - f) = (p - 1) / (v m) to the busy
        # time.
        pp_bubble=busy * bubble_fraction(job) / (1 - bubble_fraction(job)),
        pp_p2p=pp_p2p_s(d, job, cluster),
        dp_allreduce=dp_allreduce_s(d, job, cluster, dp_collective_efficiency, backward),
        data_wait=data_wait_s, overhead=step_overhead_s * contention)
