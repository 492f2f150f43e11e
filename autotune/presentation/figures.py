"""Figure files: matplotlib without a display or pyplot state, one resolution, and a
placeholder that says why when there is nothing to plot (so no link points nowhere)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("MPLCONFIGDIR", "/tmp/autotune-mpl")

from matplotlib.figure import Figure  # noqa: E402 - after MPLCONFIGDIR
from matplotlib.ticker import FuncFormatter  # noqa: E402

__all__ = ["DPI", "Figure", "placeholder", "save", "thousands"]

DPI = 110


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


def placeholder(path: Path, title: str, note: str) -> Path:
    fig = Figure(figsize=(6, 2.2))
    ax = fig.subplots()
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.45, note, ha="center", va="center", wrap=True, fontsize=11)
    return save(fig, path)


def thousands(ax) -> None:
    """Y tick labels with thousands separators."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
