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

