"""Short names of knobs, a point's knob values in one line (tables, progress lines), and a
share as a percentage (findings, reports)."""

from __future__ import annotations

SHORT_NAMES = {
    "runtime.mode": "mode", "precision": "prec", "train.micro_batches": "micro",
    "runtime.threads": "thr", "train.recompute": "recomp", "data.num_workers": "workers",
    "runtime.memory_optimize_level": "mem", "parallel.split": "split",
    "runtime.jit_level": "jit", "data.prefetch": "prefetch",
}


def short(knob: str) -> str:
    return SHORT_NAMES.get(knob, knob.rsplit(".", 1)[-1])


def params_label(params: dict) -> str:
    return " ".join(f"{short(k)}={v}" for k, v in params.items())


def share_text(fraction: float) -> str:
    """A share of a whole as a percentage: 0.123 -> '12.3 %'."""
    return f"{100 * fraction:.1f} %"


def counted(n: int, noun: str) -> str:
    """``1 key``, ``4 keys``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
