"""``plan.png``: every predicted configuration as predicted tokens/s against predicted
peak memory per device, with the memory budget as a line, so the trade-off reads at a
glance (the ranked table is ``plan.md``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from autotune.presentation.figures import Figure, placeholder, save, thousands


def point_label(r) -> str:
    """One plan point as every place names it (a ruled-out example, a chart's label): its
    split and micro-batches, then the knobs two points of that split may differ in."""
    knobs = [r.get("recompute"), "SP" if r.get("seq_parallel") else "",
             "opt shard" if r.get("opt_shard") else "", r.get("precision")]
    return " ".join([f"{r['split']} m={r['micro_batches']}", *filter(None, knobs)])

#: How many of the best-ranked points carry their rank and split as a label, and where each
#: label sits (points offsets: the best ones are often neighbours).
LABELLED = 3
LABEL_OFFSETS = ((6, 10), (6, -14), (-70, 16))


def plan_figure(df: pd.DataFrame, path: Path, *, title: str, budget_gib: float) -> Path:
    """``df`` is plan.csv's frame (``peak_gib``, ``tokens_per_s``, ``fits``, ``tight``,
    ``rank``, ``split``, ``micro_batches``); points without a prediction are left out."""
    fig = tradeoff(df, title=title, budget_gib=budget_gib)
    if fig is None:
        return placeholder(path, title, "No configuration has a predicted step time "
                           "(see plan.md for why).")
    return save(fig, path)


def tradeoff(df: pd.DataFrame, *, title: str, budget_gib: float) -> Figure | None:
    """The figure of :func:`plan_figure`; None when no point has a prediction."""
    known = df.dropna(subset=["peak_gib", "tokens_per_s"]) if not df.empty else df
    if known.empty:
        return None
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    fits = known["fits"].astype(bool)
    tight = fits & known["tight"].astype(bool)
    groups = [(fits & ~tight, "fits the budget", "tab:blue", "o"),
              (tight, "fits, within the model's error", "tab:orange", "o"),
              (~fits, "over the memory budget", "tab:gray", "x")]
    for mask, label, colour, marker in groups:
        if mask.any():
            ax.scatter(known.loc[mask, "peak_gib"], known.loc[mask, "tokens_per_s"], s=18,
                       c=colour, marker=marker, label=f"{label} ({int(mask.sum())})", alpha=0.8)
    ax.axvline(budget_gib, color="tab:red", ls="--", lw=1,
               label=f"memory budget {budget_gib:g} GiB")
    best = known[fits].sort_values("rank").drop_duplicates("rank").head(LABELLED)
    for offset, (_, r) in zip(LABEL_OFFSETS, best.iterrows()):
        ax.annotate(f"#{int(r['rank'])} {point_label(r)}",
                    (r["peak_gib"], r["tokens_per_s"]), textcoords="offset points",
                    xytext=offset, fontsize=7, arrowprops={"arrowstyle": "-", "lw": 0.5})
    low, high = known["peak_gib"].min(), max(known["peak_gib"].max(), budget_gib)
    if low > 0 and high / low > 50:  # a wide range: the budget's neighbourhood stays legible
        ax.set_xscale("log")
    ax.set_xlabel("predicted peak memory per device (GiB)")
    ax.set_ylabel("predicted tokens/s")
    thousands(ax)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return fig


#: The parts of a step the breakdown chart stacks (plan.csv's ``time_<part>_s`` columns), in
#: order, with their labels: compute without its recompute forward, the recompute forward,
#: the fixed per-layer latency, the memory-bound kernels, each collective, the bubble.
PARTS = (("compute", "compute"), ("recompute", "recompute forward"),
         ("layer_latency", "layer latency"), ("memory_bound", "memory-bound kernels"),
         ("mp_collectives", "tensor-parallel collectives"),
         ("cp_collectives", "context-parallel collectives"),
         ("pp_p2p", "pipeline sends"), ("dp_allreduce", "data-parallel all-reduce"),
         ("pp_bubble", "pipeline bubble"), ("data_wait", "data wait"),
         ("overhead", "step overhead"))


def step_parts(row: pd.Series) -> dict[str, float]:
    """A plan.csv row's step time by part (seconds): compute is counted without its
    recompute forward, which is a part of its own; the parts add up to the step."""
    parts = {key: float(row.get(f"time_{key}_s") or 0.0) for key, _ in PARTS}
    parts["compute"] -= parts["recompute"]
    return parts


def breakdown_figure(top: pd.DataFrame, path: Path, *, title: str) -> Path:
    """``breakdown.png``: the step time of the best configurations (``top``: plan.csv rows,
    best first) as stacked bars of compute, recompute, each collective and the bubble."""
    fig = breakdown(top, title=title)
    if fig is None:
        return placeholder(path, title, "No ranked configuration has a predicted step time "
                           "(see plan.md for why).")
    return save(fig, path)


def breakdown(top: pd.DataFrame, *, title: str) -> Figure | None:
    """The figure of :func:`breakdown_figure`; None when no row has a step time."""
    known = top.dropna(subset=["step_s"]) if "step_s" in top else top.iloc[0:0]
    if known.empty:
        return None
    rows = [step_parts(r) for _, r in known.iterrows()]
    labels = [f"#{r['rank']} {point_label(r)}" if pd.notna(r.get("rank")) else point_label(r)
              for _, r in known.iterrows()]
    fig = Figure(figsize=(11, 1.6 + 0.4 * len(rows)), layout="constrained")
    ax = fig.subplots()
    left = [0.0] * len(rows)
    colours = iter(("tab:blue", "tab:cyan", "tab:olive", "tab:green", "tab:orange", "tab:pink",
                    "tab:brown", "tab:red", "tab:gray", "tab:purple", "black"))
    y = list(range(len(rows)))[::-1]  # the best on top
    for (key, label), colour in zip(PARTS, colours):
        widths = [r[key] for r in rows]
        if not any(w > 0 for w in widths):
            continue
        ax.barh(y, widths, left=left, color=colour, label=label, height=0.7)
        left = [a + w for a, w in zip(left, widths)]
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("predicted seconds per optimizer step")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # off the bars
    return fig
