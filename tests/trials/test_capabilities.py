"""trials.contract.capabilities: the hardware profile alone says what the backend can run."""

from __future__ import annotations

from trials.contract.capabilities import unsupported_reason
from trials.contract.schema import DType, HardwareConfig, ParallelConfig, TrialConfig


def cfg(supports: dict, *, mp: int = 1, pp: int = 1, dtype: DType = DType.float32):
    c = TrialConfig(hardware=HardwareConfig(name="hw", supports=supports),
                    parallel=ParallelConfig(mp=mp, pp=pp))
    c.precision.dtype = dtype
    return c


def test_a_capability_the_profile_does_not_claim_is_refused_with_its_knob():
    # Rule: mp > 1 needs supports.model_parallel; the reason names the knob and profile.
    reason = unsupported_reason(cfg({}, mp=2))
    assert reason is not None and "parallel.mp=2" in reason and "hw" in reason
    # Rule: pp > 1 needs supports.pipeline_parallel.
    assert "parallel.pp=2" in unsupported_reason(cfg({"model_parallel": True}, pp=2))
    # Rule: bf16 needs supports.bf16.
    assert "bf16" in unsupported_reason(cfg({}, dtype=DType.bfloat16))


def test_what_the_profile_claims_or_the_plain_default_is_allowed():
    # Rule: claimed capabilities pass; fp32 on one device needs none.
    assert unsupported_reason(cfg({})) is None
    assert unsupported_reason(cfg({"model_parallel": True, "pipeline_parallel": True,
                                   "bf16": True}, mp=2, pp=2, dtype=DType.bfloat16)) is None
    # Rule: fp16 is not gated by the profile (only bf16 is).
    assert unsupported_reason(cfg({}, dtype=DType.float16)) is None
