"""One job as the cost model sees it: the split, the batch, the dtype, the memory knobs,
and the cluster it runs on. Built from a trial config, so the sweep, ``plan`` and the
simulated trial describe a job the same way."""

from __future__ import annotations

from dataclasses import dataclass

from trials.contract.schema import DType, HardwareConfig, TrialConfig
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
    optimizer_shard: bool = False  # MindSpore's parallel optimizer: states split by dp
    #: The program keeps its own fp32 gradient accumulator under accumulation: ours does
    #: (trials/step.py); Megatron-LM accumulates into its gradient buffer.
    fp32_accumulator: bool = False

    @classmethod
    def of(cls, cfg: TrialConfig, *, sequence_parallel: bool = False,
           optimizer_shard: bool = False) -> Job:
        """The job of our trial program (the only one a trial config describes)."""
        p, t = cfg.parallel, cfg.train
        return cls(dp=p.dp, mp=p.mp, pp=p.pp, global_batch=t.global_batch,
                   micro_batches=t.micro_batches, dtype=cfg.precision.dtype,
                   recompute=t.recompute,
                   sequence_parallel=sequence_parallel,
                   optimizer_shard=optimizer_shard, fp32_accumulator=True)

    @property
    def devices(self) -> int:
        return self.dp * self.mp * self.pp

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

    @property
    def devices_per_node(self) -> int:
        return self.hardware.devices

    @property
    def devices(self) -> int:
        return self.nodes * self.hardware.devices

