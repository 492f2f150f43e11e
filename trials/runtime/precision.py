"""Mixed precision through ``mindspore.amp.auto_mixed_precision`` (loss scaling: step.py)."""

from __future__ import annotations

import mindspore as ms
from mindspore import nn

from trials.contract.schema import DType, TrialConfig


def apply_precision(model: nn.Cell, cfg: TrialConfig) -> nn.Cell:
    if cfg.precision.dtype is DType.float32 or cfg.precision.amp_level == "O0":
        return model
    from mindspore import amp

    return amp.auto_mixed_precision(model, cfg.precision.amp_level,
                                    dtype=getattr(ms, cfg.precision.dtype.value))
