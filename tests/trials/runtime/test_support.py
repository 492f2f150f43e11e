"""trials.runtime.support: the profile refuses what the backend cannot run; a probe confirms
a low-precision dtype the profile allows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trials.contract.schema import DType, HardwareConfig, ParallelConfig, TrialConfig
from trials.runtime.support import Unsupported, check_supported

REPO = Path(__file__).resolve().parents[3]


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


def _probe(supports: dict, dtype: DType) -> subprocess.CompletedProcess:
    """check_supported in a process of its own, as a trial runs it: one dtype per process.
    In one process, a bf16 probe the backend refused has made the next fp16 probe fail
    with its error (PyNative's queue; the suite's workers, CI)."""
    code = ("import sys; sys.path.insert(0, 'tests/trials/runtime'); "
            "from test_support import cfg; from trials.contract.schema import DType; "
            "from trials.runtime.support import check_supported; "
            f"check_supported(cfg({supports!r}, DType.{dtype.name}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


@pytest.mark.slow
def test_a_profile_claiming_a_dtype_the_backend_lacks_is_a_config_error():
    # Rule: the probe (one MatMul) confirms; if the CPU backend has no bf16 MatMul, the
    # profile is wrong and the error names the key to fix.
    refused = _probe({"bf16": True}, DType.bfloat16)
    assert refused.returncode != 0
    assert "ConfigError" in refused.stderr and "hardware.supports.bf16=false" in refused.stderr
    # Rule: fp16 MatMul runs on the CPU backend: the probe passes.
    passed = _probe({}, DType.float16)
    assert passed.returncode == 0, passed.stderr[-2000:]
