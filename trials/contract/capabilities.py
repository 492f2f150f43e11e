"""What the backend can run, from the hardware profile alone (``hardware.supports``).

The one source of backend capability: the orchestrator rules a point out before
launch with it, and the trial program refuses the same points with it (as
``unsupported``). The trial's runtime probe may confirm a capability the
profile claims; it never decides one (a failed probe means the profile is wrong).
"""

from __future__ import annotations

from trials.contract.schema import DType, TrialConfig


def unsupported_reason(cfg: TrialConfig) -> str | None:
    """Why the hardware profile cannot run this configuration, or None."""
    hw, p = cfg.hardware, cfg.parallel
    backend = hw.backend.value
    if p.mp > 1 and not hw.supports.get("model_parallel", False):
        return (f"model parallel (parallel.mp={p.mp}) is not available on the {backend} "
                f"backend (hardware profile {hw.name})")
    if p.pp > 1 and not hw.supports.get("pipeline_parallel", False):
        return (f"pipeline parallel (parallel.pp={p.pp}) is not available on the {backend} "
                f"backend (hardware profile {hw.name})")
    if cfg.precision.dtype is DType.bfloat16 and not hw.supports.get("bf16", False):
        return f"bf16 is not available on the {backend} backend (hardware profile {hw.name})"
    return None
