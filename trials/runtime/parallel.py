"""Join the parallel group: data parallel under msrun (mccl on the CPU), or semi-auto
parallel with pipeline stages on Ascend/GPU."""

from __future__ import annotations

import mindspore as ms

from trials.contract.schema import TrialConfig


def init_parallel(cfg: TrialConfig) -> tuple[int, int]:
    """(rank, world size); (0, 1) for a single device."""
    if cfg.parallel.devices == 1:
        return 0, 1
    from mindspore.communication import get_group_size, get_rank, init

    init()
    if cfg.parallel.mp == 1 and cfg.parallel.pp == 1:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True)
    else:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                                     pipeline_stages=cfg.parallel.pp, gradients_mean=True)
    return get_rank(), get_group_size()
