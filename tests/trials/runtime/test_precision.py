"""trials.runtime.precision: mixed precision only where the precision asks for it."""

from __future__ import annotations

from mindspore import nn

from trials.contract.schema import DType, HardwareConfig, PrecisionConfig, TrialConfig
from trials.runtime.applied import dense_compute_dtype
from trials.runtime.precision import apply_precision


def cfg(dtype: DType, amp_level: str) -> TrialConfig:
    return TrialConfig(hardware=HardwareConfig(name="cpu"),
                       precision=PrecisionConfig(dtype=dtype, amp_level=amp_level))


def test_fp32_or_o0_leaves_the_model_alone_and_fp16_casts_its_dense_layers():
    model = nn.SequentialCell([nn.Dense(2, 2)])
    # Rule: fp32, or amp level O0, returns the very model unchanged.
    assert apply_precision(model, cfg(DType.float32, "O2")) is model
    assert apply_precision(model, cfg(DType.float16, "O0")) is model
    assert dense_compute_dtype([model]) == "fp32"
    # Rule: otherwise auto_mixed_precision at that level and dtype (fp16 Dense layers).
    half = apply_precision(model, cfg(DType.float16, "O2"))
    assert dense_compute_dtype([half]) == "fp16"
