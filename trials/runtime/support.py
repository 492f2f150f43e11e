"""Refuse what the backend cannot run, as the ``unsupported`` outcome.

The hardware profile decides (:mod:`trials.contract.capabilities`, the same rule
the orchestrator applies before launch). A probe of one MatMul in the compute
dtype then confirms a low-precision dtype the profile allows; if the backend
disagrees, the profile is wrong, and the error says which key to fix.
"""

from __future__ import annotations

import mindspore as ms

from trials.contract.capabilities import unsupported_reason
from trials.contract.schema import ConfigError, DType, TrialConfig


class Unsupported(RuntimeError):
    """The backend cannot run this knob value (an outcome, not a crash)."""


def check_supported(cfg: TrialConfig) -> None:
    reason = unsupported_reason(cfg)
    if reason is not None:
        raise Unsupported(reason)
    if cfg.precision.dtype is not DType.float32:
        _confirm_dtype(cfg)


def _confirm_dtype(cfg: TrialConfig) -> None:
    import numpy as np
    from mindspore import ops

    dtype = cfg.precision.dtype.value
    x = ms.Tensor(np.ones((4, 4), np.float32)).astype(getattr(ms, dtype))
    try:
        ops.matmul(x, x).asnumpy()
    except (RuntimeError, TypeError, ValueError) as exc:
        # A refused launch leaves work in PyNative's queue: the next MatMul launched in the
        # process (another dtype's probe) was refused with this dtype's error, in about one
        # process of two; with this wait, in none of 80. A test worker that had run other
        # tests still met it once, so the tests probe one dtype a process, as a trial does.
        ms.runtime.synchronize()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        flag = "hardware.supports.bf16=false" if cfg.precision.dtype is DType.bfloat16 else \
            f"another precision than {cfg.precision.name}"
        raise ConfigError(f"hardware profile {cfg.hardware.name} allows {dtype}, but the "
                          f"{ms.get_context('device_target')} backend has no {dtype} MatMul "
                          f"({first}): fix the profile ({flag})") from exc
