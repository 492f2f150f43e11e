"""Apply the execution knobs through MindSpore 2.10's current APIs.

Order matters: device, memory and thread settings must precede the first op.
A knob the backend cannot run raises :class:`Unsupported`, naming the backend.
"""

from __future__ import annotations

import os
from pathlib import Path

import mindspore as ms
from mindspore import nn

from trials.config import Backend, DType, Mode, TrialConfig


class Unsupported(RuntimeError):
    """The backend cannot run this knob value (an outcome, not a crash)."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("AUTOTUNE_CACHE", Path.home() / ".cache" / "autotune"))


def cache_dir(cfg: TrialConfig) -> Path:
    return Path(cfg.data.cache_dir) if cfg.data.cache_dir else default_cache_dir()


def set_up_context(cfg: TrialConfig) -> None:
    """Device, mode, memory level and CPU threads."""
    ms.set_device(cfg.hardware.backend.value)
    mode = ms.GRAPH_MODE if cfg.runtime.mode is Mode.graph else ms.PYNATIVE_MODE
    ms.set_context(mode=mode)
    ms.runtime.set_memory(optimize_level=cfg.runtime.memory_optimize_level.value)
    if cfg.runtime.threads > 0 and cfg.hardware.backend is Backend.CPU:
        ms.device_context.cpu.op_tuning.threads_num(cfg.runtime.threads)
    ms.set_seed(cfg.train.seed)


def check_parallel_support(cfg: TrialConfig) -> None:
    """Model and pipeline parallel exist only on Ascend/GPU (CPU: data parallel only)."""
    p = cfg.parallel
    backend = ms.get_context("device_target")
    if (p.mp > 1 or p.pp > 1) and backend == "CPU":
        raise Unsupported(f"parallel.mp={p.mp} parallel.pp={p.pp}: model/pipeline parallel "
                          f"needs Ascend or GPU; the {backend} backend supports data parallel "
                          "only")


def check_dtype_support(cfg: TrialConfig) -> None:
    """Probe one MatMul in the compute dtype: the backend's own answer, not a table."""
    if cfg.precision.dtype is DType.float32:
        return
    import numpy as np
    from mindspore import ops

    dtype = getattr(ms, cfg.precision.dtype.value)
    x = ms.Tensor(np.ones((4, 4), np.float32)).astype(dtype)
    try:
        ops.matmul(x, x).asnumpy()
    except (RuntimeError, TypeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unsupported(f"precision={cfg.precision.name}: the {ms.get_context('device_target')} "
                          f"backend has no {cfg.precision.dtype.value} MatMul ({first})") from exc


def init_data_parallel(cfg: TrialConfig) -> tuple[int, int]:
    """(rank, world size). dp > 1 runs under msrun with the mccl backend on CPU."""
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


def shard_model_parallel(model: nn.Cell, dp: int, mp: int) -> None:
    """Megatron-style tensor parallel strategies for the built-in GPT (Ascend/GPU).

    Column-parallel qkv/fc, row-parallel proj/out; data parallel on the batch.
    """
    for block in getattr(model, "blocks", []):
        block.attn.qkv.matmul.shard(((dp, 1), (mp, 1)))
        block.attn.proj.matmul.shard(((dp, mp), (1, mp)))
        block.fc.matmul.shard(((dp, 1), (mp, 1)))
        block.out.matmul.shard(((dp, mp), (1, mp)))


def apply_precision(model: nn.Cell, cfg: TrialConfig) -> nn.Cell:
    if cfg.precision.dtype is DType.float32 or cfg.precision.amp_level == "O0":
        return model
    from mindspore import amp

    return amp.auto_mixed_precision(model, cfg.precision.amp_level,
                                    dtype=getattr(ms, cfg.precision.dtype.value))


def apply_jit_level(cells: list[nn.Cell], cfg: TrialConfig) -> None:
    if cfg.runtime.mode is Mode.graph:
        for cell in cells:
            cell.set_jit_config(ms.JitConfig(jit_level=cfg.runtime.jit_level.value))


def peak_flops_for(cfg: TrialConfig) -> float | None:
    """Peak FLOP/s of one device for the precision in use, times the devices used.

    The profile's number where it has one; on the CPU (null) a cached GEMM
    calibration, which already covers every core, so it is not multiplied.
    """
    dtype = cfg.precision.dtype.value
    tflops = cfg.hardware.peak_tflops.get(dtype)
    if tflops is not None:
        return float(tflops) * 1e12 * cfg.parallel.devices
    if cfg.hardware.backend is not Backend.CPU:
        return None
    from trials.calibrate import peak_flops

    try:
        return peak_flops(dtype, cache_dir(cfg))
    except (RuntimeError, TypeError, ValueError):
        return None  # no such dtype here: MFU is not reported rather than invented


def applied_settings(cfg: TrialConfig) -> dict:
    """The knob values as MindSpore reports them back (what really took effect)."""
    import mindspore.dataset as ds

    mode = ms.get_context("mode")
    out = {
        "device_target": ms.get_context("device_target"),
        "mode": "graph" if mode == ms.GRAPH_MODE else "pynative",
        "prefetch_size": ds.config.get_prefetch_size(),
        "dataset_seed": ds.config.get_seed(),
    }
    if cfg.hardware.backend is Backend.CPU:
        out["cpu_threads"] = cfg.runtime.threads or None
    return out
