"""Short names of knobs, a point's knob values in one line (tables, progress lines), a
share as a percentage (findings, reports) and a size in the unit that shows it."""

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


def mib_text(mib: float) -> str:
    """A size given in MiB, in KiB under 1 MiB: the CPU allocator's curve of a tiny model
    (a few KiB) read "peak 0.0 MiB, mean 0.0 MiB, peak/mean 3.68"."""
    return f"{mib:,.1f} MiB" if mib >= 1 else f"{mib * 1024:,.1f} KiB"


def counted(n: int, noun: str) -> str:
    """``1 key``, ``4 keys``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
