"""Step time per optimizer step, one function per term, each checkable by hand.

    step = overhead + data wait
         + (compute + layer latency + tensor-parallel collectives) x (1 + (p - 1) / m)
         + pipeline point-to-point sends + data-parallel gradient all-reduce

(the factor 1 + (p - 1) / m is the pipeline bubble)

- compute: hardware FLOPs of the device's share / (peak FLOP/s x efficiency);
  recompute adds one forward of the blocks (model_dims.hardware_flops_per_token);
- layer latency: a fixed time per layer and micro-batch that does not scale with FLOPs
  (kernel launches, memory-bound element-wise work), a calibrated constant;
- collectives: ring all-reduce of n bytes over g ranks moves 2 (g-1)/g n bytes per
  rank; bandwidth x a calibrated collective efficiency, plus 2 (g-1) latencies. Tensor
  and data parallel have an efficiency each: their collectives differ in size, dtype,
  and in how much of them the framework overlaps with compute;
- tensor parallel: 2 all-reduces of s b h activations in the forward and 2 in the
  backward of every layer and micro-batch (Megatron-LM's f/g operators), 2 more when
  the forward is recomputed;
- pipeline bubble: (p - 1) / (m + p - 1) of the pipelined time is idle (Narayanan et al.
  2021, section 2.2), i.e. a factor (m + p - 1) / m on the busy time;
- data parallel: one all-reduce of the stage's gradients in fp32 (not overlapped).

Which link a group uses follows Megatron's rank order (mp fastest, then dp, then pp):
a group stays inside a node while its span fits the node's devices.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autotune.plan.layout import Cluster, Job, Recompute
from autotune.plan.memory import stage_params
from autotune.plan.model_dims import ModelDims, hardware_flops_per_token
from trials.contract.schema import LinkConfig

FP32_BYTES = 4


@dataclass(frozen=True)
class TimeBreakdown:
    """Seconds per optimizer step by term."""

    compute: float
    recompute: float  # the part of compute that is the extra forward (already in compute)
    layer_latency: float
    mp_collectives: float
    pp_bubble: float
    pp_p2p: float
    dp_allreduce: float
    data_wait: float
    overhead: float

    @property
    def step_s(self) -> float:
        return (self.compute + self.layer_latency + self.mp_collectives + self.pp_bubble
                + self.pp_p2p + self.dp_allreduce + self.data_wait + self.overhead)

    @property
    def communication(self) -> float:
        return self.mp_collectives + self.pp_p2p + self.dp_allreduce

    def seconds(self) -> dict[str, float]:
        return {**asdict(self), "step": self.step_s}


def ring_allreduce_s(n_bytes: float, ranks: int, link: LinkConfig,
                     collective_efficiency: float) -> float:
    if ranks <= 1 or n_bytes <= 0:
        return 0.0
    bandwidth = link.bandwidth_gbs * 1e9 * collective_efficiency
    return 2 * (ranks - 1) / ranks * n_bytes / bandwidth + 2 * (ranks - 1) * link.latency_us * 1e-6


def link_for_span(span: int, cluster: Cluster) -> LinkConfig:
    """The link a group of consecutive ranks ``span`` wide crosses."""
    if cluster.nodes > 1 and span > cluster.devices_per_node:
        return cluster.hardware.inter_node
    return cluster.hardware.intra_node


def compute_flops(d: ModelDims, job: Job) -> tuple[float, float]:
    """(hardware FLOPs per device per step, of which the recompute forward)."""
    tokens = job.global_batch * d.seq
    total = hardware_flops_per_token(d, recompute=job.recompute.value) * tokens / job.devices
    plain = hardware_flops_per_token(d) * tokens / job.devices
    return total, total - plain


def layer_latency_term_s(d: ModelDims, job: Job, per_layer_s: float) -> float:
    """Fixed seconds per layer and micro-batch (forward, backward and any recompute
    forward together), times the stage's L / p layers and m micro-batches.

    Source: a derived number. On the vTrain landscape (bench/data/vtrain_single.csv:
    Megatron-DeepSpeed, fp16, full recompute, A100) measured / predicted time rose with the
    micro-batch count (0.91x at m = 2, 1.65x at 8, 2.36x at 16) while the FLOPs stayed the
    same; a least-squares fit gave ~2.7 ms per layer and micro-batch, ~59 % of the measured
    time. Every vTrain row is full recompute, so how the constant splits between the
    passes is not identified: it is fitted per hardware profile (calibration.py). The
    profiles' prior is 0: 2.7 ms as the A100 prior made the uncalibrated Megatron-LM points
    (N21, K22: large models, fused kernels) 15-20 points worse.
    """
    return d.layers // job.pp * job.micro_batches * per_layer_s


def mp_collectives_s(d: ModelDims, job: Job, cluster: Cluster,
                     collective_efficiency: float) -> float:
    if job.mp == 1:
        return 0.0
    per_call = d.seq * job.micro_batch_size * d.hidden * job.element_bytes
    calls = d.layers // job.pp * job.micro_batches * (6 if job.recompute is Recompute.full
                                                      else 4)
    link = link_for_span(job.mp, cluster)
    return calls * ring_allreduce_s(per_call, job.mp, link, collective_efficiency)


def bubble_fraction(job: Job) -> float:
    """Idle share of the pipelined time: (p - 1) / (m + p - 1)."""
    if job.pp == 1:
        return 0.0
    return (job.pp - 1) / (job.micro_batches + job.pp - 1)


def pp_p2p_s(d: ModelDims, job: Job, cluster: Cluster) -> float:
    """Activations forward and gradients backward across one stage boundary, per
    micro-batch (sequential in the critical path of the first and last stages)."""
    if job.pp == 1:
        return 0.0
    size = d.seq * job.micro_batch_size * d.hidden * job.element_bytes / (
        job.mp if job.sequence_parallel else 1)
    link = link_for_span(job.mp * job.dp + 1, cluster)
    per_send = size / (link.bandwidth_gbs * 1e9) + link.latency_us * 1e-6
    return 2 * job.micro_batches * per_send


def dp_allreduce_s(d: ModelDims, job: Job, cluster: Cluster,
                   collective_efficiency: float) -> float:
    """One all-reduce of the stage's gradients in fp32 across dp (reduce-scatter +
    all-gather under the parallel optimizer: the same volume). The reduction dtype and the
    overlap with the backward are not modelled: the fitted data-parallel efficiency is
    what absorbs them (it may exceed 1 where the framework hides the all-reduce)."""
    link = link_for_span(job.mp * job.dp, cluster)
    return ring_allreduce_s(stage_params(d, job) * FP32_BYTES, job.dp, link,
                            collective_efficiency)


def breakdown(d: ModelDims, job: Job, cluster: Cluster, *, peak_flops: float,
              compute_efficiency: float, mp_collective_efficiency: float,
              dp_collective_efficiency: float, layer_latency_s: float,
              step_overhead_s: float, data_wait_s: float = 0.0) -> TimeBreakdown:
    total_flops, recompute_flops = compute_flops(d, job)
    rate = peak_flops * compute_efficiency
    compute = total_flops / rate
    latency = layer_latency_term_s(d, job, layer_latency_s)
    mp = mp_collectives_s(d, job, cluster, mp_collective_efficiency)
    busy = compute + latency + mp
    return TimeBreakdown(
        compute=compute, recompute=recompute_flops / rate, layer_latency=latency,
        mp_collectives=mp,
        # Idle share f of the pipelined time adds f / (1 - f) = (p - 1) / m to the busy time.
        pp_bubble=busy * bubble_fraction(job) / (1 - bubble_fraction(job)),
        pp_p2p=pp_p2p_s(d, job, cluster),
        dp_allreduce=dp_allreduce_s(d, job, cluster, dp_collective_efficiency),
        data_wait=data_wait_s, overhead=step_overhead_s)
