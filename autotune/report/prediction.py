"""How well the cost model predicted the trials it let through: a table, its error and
a predicted-vs-measured figure. Simulated trials are left out (they are predictions).
Each row names the fit that predicted it (the study's own, the imported one, the priors:
autotune/plan/fits.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from autotune.presentation.tables import markdown_table
from autotune.study.records import TrialRecord
from autotune.study.selection import distinct
from trials.contract.outcomes import Outcome

os.environ.setdefault("MPLCONFIGDIR", "/tmp/autotune-mpl")


def pairs(records: list[TrialRecord]) -> pd.DataFrame:
    """Predicted and measured peak memory and tokens/s of every measured, predicted trial."""
    rows = []
    for r in distinct(records):
        predicted = r.prediction
        if r.simulated or predicted is None or not r.launched:
            continue
        rows.append({"trial": r.number, "reason": r.reason_text,
                     "predicted peak GiB": predicted.peak_gib,
                     "measured peak GiB": r.peak_memory_gib,
                     "predicted tok/s": predicted.tokens_per_s,
                     "measured tok/s": r.tokens_per_s, "fit": predicted.constants})
    return pd.DataFrame(rows)


def errors(df: pd.DataFrame) -> dict[str, dict[str, float]]:
    """MAPE and largest error (relative) of memory and of tokens/s over the trials that
    completed (a stopped trial's peak is only what it reached before it was stopped)."""
    out = {}
    for what, p, m in (("memory", "predicted peak GiB", "measured peak GiB"),
                       ("tokens/s", "predicted tok/s", "measured tok/s")):
        if df.empty:
            continue
        both = df[df["reason"] == Outcome.OK.value][[p, m]].dropna()
        if both.empty:
            continue
        rel = (both[p] - both[m]) / both[m]
        out[what] = {"n": int(len(both)), "mape": float(np.mean(np.abs(rel))),
                     "max": float(rel.iloc[int(np.argmax(np.abs(rel.values)))])}
    return out


def write(records: list[TrialRecord], out: Path, *, fit: str | None = None) -> dict:
    """prediction.md and prediction.png; returns the errors. ``fit``: the source of the
    study's fit now (what its next predictions use)."""
    df = pairs(records)
    errs = errors(df)
    lines = ["# The cost model against the measurements", ""]
    if fit:
        lines += [f"The study's cost model now: {fit}.", ""]
    if not errs:
        lines.append("No measured trial carries a prediction (user workloads have no "
                     "dimensions to predict from; simulated trials are not measurements).")
    for what, e in errs.items():
        lines.append(f"- {what}: mean absolute error {100 * e['mape']:.1f} % over {e['n']} "
                     f"completed trial(s), largest {100 * e['max']:+.1f} % (each predicted "
                     "before it ran, with the constants of that moment)")
    lines += ["", markdown_table(df) if not df.empty else ""]
    (out / "prediction.md").write_text("\n".join(lines) + "\n")
    figure(df, out / "prediction.png")
    return errs


def figure(df: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4))
    axes = fig.subplots(1, 2)
    for ax, (p, m, title) in zip(axes, (
            ("predicted peak GiB", "measured peak GiB", "Peak memory (GiB)"),
            ("predicted tok/s", "measured tok/s", "Tokens/s"))):
        both = df[[p, m]].dropna() if not df.empty else pd.DataFrame()
        ax.set_title(title)
        if both.empty:
            ax.text(0.5, 0.5, "no predicted, measured trial", ha="center", va="center")
            ax.axis("off")
            continue
        ax.scatter(both[m], both[p], color="tab:blue", zorder=3)
        lo, hi = float(both.min().min()) * 0.9, float(both.max().max()) * 1.1
        ax.plot([lo, hi], [lo, hi], color="gray", linestyle="--", label="exact")
        ax.set_xlabel("measured")
        ax.set_ylabel("predicted")
        ax.legend(loc="upper left")
    fig.savefig(path, dpi=110, bbox_inches="tight")
