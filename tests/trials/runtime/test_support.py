"""trials.runtime.support: the profile refuses what the backend cannot run; a probe confirms
a low-precision dtype the profile allows."""

from __future__ import annotations

import pytest

from trials.contract.schema import ConfigError, DType, HardwareConfig, ParallelConfig, TrialConfig
from trials.runtime.support import Unsupported, check_supported


def cfg(supports: dict, dtype: DType = DType.float32, mp: int = 1) -> TrialConfig:
    c = TrialConfig(hardware=HardwareConfig(name="cpu", supports=supports),
                    parallel=ParallelConfig(mp=mp))
    c.precision.dtype = dtype
    return c


def test_the_profile_decides_before_any_probe():
    # Rule: what the profile does not claim is the `unsupported` outcome (not a crash).
    with pytest.raises(Unsupported, match="parallel.mp=2"):
        check_supported(cfg({}, mp=2))
    with pytest.raises(Unsupported, match="bf16"):
        check_supported(cfg({}, DType.bfloat16))
    # Rule: fp32 needs no probe and passes.
    check_supported(cfg({}))


@pytest.mark.slow
def test_a_profile_claiming_a_dtype_the_backend_lacks_is_a_config_error():
    # Rule: the probe (one MatMul) confirms; if the CPU backend has no bf16 MatMul, the
    # profile is wrong and the error names the key to fix.
    with pytest.raises(ConfigError, match=r"hardware.supports.bf16=false"):
        check_supported(cfg({"bf16": True}, DType.bfloat16))
    # Rule: fp16 MatMul runs on the CPU backend: the probe passes.
    check_supported(cfg({}, DType.float16))
