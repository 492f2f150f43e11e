"""Device, execution mode, memory level, CPU threads and jit level.

Order matters: device, memory and thread settings must precede the first op.
"""

from __future__ import annotations

import mindspore as ms
from mindspore import nn

from trials.contract.schema import Backend, Mode, TrialConfig


def set_up_context(cfg: TrialConfig) -> None:
    ms.set_device(cfg.hardware.backend.value)
    mode = ms.GRAPH_MODE if cfg.runtime.mode is Mode.graph else ms.PYNATIVE_MODE
    ms.set_context(mode=mode)
    ms.runtime.set_memory(optimize_level=cfg.runtime.memory_optimize_level.value)
    if cfg.runtime.threads > 0 and cfg.hardware.backend is Backend.CPU:
        ms.device_context.cpu.op_tuning.threads_num(cfg.runtime.threads)
    ms.set_seed(cfg.train.seed)


def apply_jit_level(cells: list[nn.Cell], cfg: TrialConfig) -> None:
    if cfg.runtime.mode is Mode.graph:
        for cell in cells:
            cell.set_jit_config(ms.JitConfig(jit_level=cfg.runtime.jit_level.value))


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
