"""One job as the cost model sees it: the split, the batch, the dtype, the memory knobs,
and the cluster it runs on. Built from a trial config, so the sweep, ``plan`` and the
simulated trial describe a job the same way."""

from __future__ import annotations

from dataclasses import dataclass

from trials.contract.schema import DType, HardwareConfig, Mode, TrialConfig
from trials.contract.vocabulary import Recompute, format_split

__all__ = ["BYTES", "Cluster", "Job", "Recompute"]

BYTES = {DType.float32: 4, DType.float16: 2, DType.bfloat16: 2}


@dataclass(frozen=True)
class Job:
    dp: int
    mp: int
    pp: int
    global_batch: int  # sequences per optimizer step
    micro_batches: int  # accumulation steps (pp = 1) or pipeline micro-batches (pp > 1)
    dtype: DType
    recompute: Recompute = Recompute.none
    sequence_parallel: bool = False  # Megatron/MindFormers SP: activations split by mp
    #: What the data-parallel ranks split between them (ZeRO, Rajbhandari et al. 2020;
    #: MindSpore's parallel optimizer levels ``optimizer_weight_shard_size`` /
    #: ``parallel_optimizer_config``): 0 nothing, 1 optimizer states (ZeRO-1, MindSpore
    #: level1, Megatron's distributed optimizer), 2 and gradients (ZeRO-2, level2),
    #: 3 and parameters (ZeRO-3, FSDP, level3).
    shard_level: int = 0
    #: The program keeps its own fp32 gradient accumulator under accumulation: ours does
    #: (trials/step.py); Megatron-LM accumulates into its gradient buffer.
    fp32_accumulator: bool = False
    #: fp32 gradients beside the 16-bit parameters, as Megatron-LM's mixed-precision
    #: optimizer keeps them (its README, "Distributed Optimizer": bf16 params with fp32
    #: grads 18 bytes a parameter, 6 + 12 / d distributed; fp16 params and grads 20 bytes,
    #: 4 + 16 / d, the fp32 copy of the grads being the optimizer's); DeepSpeed's
    #: BF16_Optimizer likewise. ZeRO's 16 bytes (the default) keep none.
    fp32_main_grads: bool = False
    #: The 16-bit gradients autograd produces stay allocated beside those fp32 main grads
    #: all step: DeepSpeed's BF16_Optimizer under its pipeline engine folds them into its
    #: full-size fp32 gradients after each micro-batch's backward with
    #: ``update_hp_grads(clear_lp_grads=False)`` and frees them only when the next backward
    #: starts (microsoft/DeepSpeed @56c5223, ``runtime/pipe/engine.py``,
    #: ``runtime/bf16_optimizer.py``): 2 more bytes a parameter. Megatron-LM's gradient
    #: hooks fold each into ``main_grad`` and free it (False).
    keeps_16bit_grads: bool = False
    #: The loss is PyTorch's unfused ``cross_entropy`` on an fp32 upcast of the logits
    #: (torchtitan's ``loss_fn`` since ``pred.float()``), not a fused kernel that turns
    #: the saved softmax into the gradient in place (Megatron-LM's, MindSpore's):
    #: memory.logits_bytes says what each keeps.
    unfused_cross_entropy: bool = False
    #: Model chunks per pipeline stage (Megatron's interleaved 1F1B, Narayanan et al. 2021
    #: section 2.2.2; MindSpore's ``pipeline_interleave``): 1 is plain 1F1B.
    virtual_stages: int = 1
    #: Layers per pipeline stage when they are not equal (MindSpore's ``offset``:
    #: L // p + offset[i] layers on stage i); None splits them as evenly as they go.
    stage_layers: tuple[int, ...] | None = None
    #: Context parallel: the sequence split across this many ranks (Megatron-LM's
    #: ``--context-parallel-size``, ring attention); devices = dp x mp x pp x cp.
    context_parallel: int = 1
    #: Fused attention that never stores the s x s scores (FlashAttention, Dao et al.
    #: 2022; MindSpore's ``use_flash_attention``); its backward recomputes them.
    flash_attention: bool = False
    #: Gradients are reduced across dp in fp32 (ours, and Megatron's
    #: ``--accumulate-allreduce-grads-in-fp32``), else in the compute dtype.
    reduce_in_fp32: bool = True
    #: The data-parallel reduction runs in buckets during the backward pass (Megatron's
    #: ``--overlap-grad-reduce``, DDP's buckets, MindSpore's communication fusion), so only
    #: what outlasts the backward is exposed.
    overlap_grad_reduce: bool = False
    #: MindSpore's execution mode: graph (compiled, kernels launched from the device
    #: queue) or PyNative (every op dispatched from Python: a host cost per op).
    mode: Mode = Mode.graph
    #: CPU operator threads per rank (``runtime.threads``); 0 = the backend's default (the
    #: cores shared by the ranks).
    threads: int = 0

    def __post_init__(self) -> None:
        if self.stage_layers is not None and len(self.stage_layers) != self.pp:
            raise ValueError(f"stage_layers {self.stage_layers} must name {self.pp} stages")

    @classmethod
    def of(cls, cfg: TrialConfig, *, sequence_parallel: bool = False,
           shard_level: int = 0) -> Job:
        """The job of our trial program (the only one a trial config describes)."""
        p, t = cfg.parallel, cfg.train
        return cls(dp=p.dp, mp=p.mp, pp=p.pp, global_batch=t.global_batch,
                   micro_batches=t.micro_batches, dtype=cfg.precision.dtype,
                   recompute=t.recompute,
                   sequence_parallel=sequence_parallel,
                   shard_level=shard_level, fp32_accumulator=True,
                   mode=cfg.runtime.mode, threads=cfg.runtime.threads)

    @property
    def optimizer_shard(self) -> bool:
        """The optimizer states are split across dp (every shard level does that)."""
        return self.shard_level >= 1

    @property
    def devices(self) -> int:
        return self.dp * self.mp * self.pp * self.context_parallel

    @property
    def micro_batch_size(self) -> int:
        """Sequences per device per forward pass (b)."""
        return self.global_batch // (self.micro_batches * self.dp)

    @property
    def accumulation(self) -> int:
        return 1 if self.pp > 1 else self.micro_batches

    @property
    def element_bytes(self) -> int:
        """Bytes of one activation element in the compute dtype."""
        return BYTES[self.dtype]

    @property
    def split(self) -> str:
        return format_split(self.dp, self.mp, self.pp)


@dataclass(frozen=True)
class Cluster:
    hardware: HardwareConfig
    nodes: int = 1
    #: On the CPU backend, the cores every rank's operator threads and host work share
    #: (None on an accelerator: each rank has its device and its own host thread).
    host_cores: int | None = None

    @property
    def devices_per_node(self) -> int:
        return self.hardware.devices

    @property
    def devices(self) -> int:
        return self.nodes * self.hardware.devices


def threads_per_rank(job: Job, cores: int) -> float:
    """The operator threads one rank runs: its ``threads``, or its share of the cores."""
    return job.threads if job.threads > 0 else max(1.0, cores / job.devices)


def cpu_compute_share(job: Job, cores: int) -> float:
    """The fraction of the host's cores one rank's operators get: its threads, as long as
    every rank's threads fit on the cores, else an equal share (Amdahl-free: the cores are
    the CPU backend's only compute)."""
    threads = threads_per_rank(job, cores)
    return min(threads, cores / job.devices) / cores


def host_contention(job: Job, cluster: Cluster) -> float:
    """How much longer host work (op dispatch, Python, launches) takes when every rank's
    operator threads and its host thread outnumber the cores they share: max(1, ranks x
    (threads + 1) / cores). 1 on an accelerator (host work has its own cores).

    Source: a derived number. On the recorded CPU landscape (bench/data/landscape_cpu.json.gz:
    96 configurations, 2 cores) PyNative with dp = 2 ran 60 % slower than a model without
    this factor predicted; with it the in-sample step MAPE fell from 27 to 19 % and the
    model's three fastest were the measured three fastest."""
    if cluster.host_cores is None:
        return 1.0
    threads = threads_per_rank(job, cluster.host_cores)
    return max(1.0, job.devices * (threads + 1) / cluster.host_cores)

