"""The report's figures as PNG files (matplotlib, no display, no pyplot state).

Every function writes its file even when there is too little data to plot: the
figure then carries a note saying why, so the index never links a missing file.
"""

from __future__ import annotations

import math
from pathlib import Path

# Figure comes through figures, which sets MPLCONFIGDIR before matplotlib is imported.
from autotune.presentation.figures import Figure, placeholder, save, thousands
from autotune.report import importance as importance_of
from autotune.study.contrasts import pairs
from autotune.study.records import TrialRecord, unit_of
from autotune.study.selection import (
    baseline,
    budget_of,
    distinct,
    feasible,
    measured_tokens_per_s,
    pareto_front,
)
from trials.contract.outcomes import Outcome
from trials.contract.schema import CostPriors
from trials.contract.units import rate


def colour(record: TrialRecord) -> str:
    """The marker colour of a trial's reason (trials/contract/outcomes.py); grey before one."""
    return record.reason.colour if record.reason is not None else "tab:gray"


def _ended(records: list[TrialRecord]) -> list[TrialRecord]:
    return [r for r in distinct(records) if r.state not in ("RUNNING", "WAITING")]


def history(records: list[TrialRecord], path: Path, *, budget_gib: float | None) -> Path:
    """tokens/s per trial, best feasible so far, baseline; failures as crosses at zero."""
    ended = sorted(_ended(records), key=lambda r: r.number)
    unit = rate(unit_of(records))
    title = "Optimisation history"
    if not ended:
        return placeholder(path, title, "No trial has ended yet.")
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    groups: dict[str, tuple[list[int], list[float], str]] = {}

    def add(label: str, r: TrialRecord, y: float) -> None:
        groups.setdefault(label, ([], [], colour(r)))[0].append(r.number)
        groups[label][1].append(y)

    for r in ended:
        tps = measured_tokens_per_s(r)
        if r.ok and tps is not None:
            add("completed" if feasible(r, budget_gib) else "over memory budget", r, tps)
        elif tps is not None:
            add(f"{r.reason_text} ({unit} when stopped)", r, tps)
        else:
            add(r.reason_text, r, 0.0)
    for label, (xs, ys, hue) in groups.items():
        if label == "completed":
            ax.scatter(xs, ys, color="tab:blue", zorder=3, label=label)
        elif label == "over memory budget":
            ax.scatter(xs, ys, facecolors="none", edgecolors="tab:orange", zorder=3, label=label)
        elif "stopped" in label:
            ax.scatter(xs, ys, facecolors="none", edgecolors=hue, zorder=3, label=label)
        else:
            ax.scatter(xs, ys, marker="x", color=hue, zorder=3, label=f"{label} (no {unit})")
    running, xs, ys = -math.inf, [], []
    for r in ended:
        if feasible(r, budget_gib):
            running = max(running, r.tokens_per_s)
        if running > -math.inf:
            xs.append(r.number)
            ys.append(running)
    if xs:
        ax.step(xs, ys, where="post", color="tab:green", label="best feasible so far")
        top = max((r for r in ended if feasible(r, budget_gib)), key=lambda r: r.tokens_per_s)
        ax.annotate(f"#{top.number}", (top.number, top.tokens_per_s), xytext=(4, 6),
                    textcoords="offset points", fontsize=9)
    base = baseline(records)
    if base is not None and base.tokens_per_s is not None:
        ax.axhline(base.tokens_per_s, color="tab:gray", linestyle=":",
                   label=f"baseline #{base.number}")
    ax.set(title=title, xlabel="trial", ylabel=f"{rate(unit_of(records))} (steady state)")
    thousands(ax)
    ax.set_ylim(bottom=0)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def memory_vs_throughput(records: list[TrialRecord], path: Path, *,
                         budget_gib: float | None) -> Path:
    """tokens/s against peak memory, with the memory budget and the Pareto front."""
    title = "Throughput against peak memory"
    ended = [r for r in _ended(records) if r.peak_memory_gib is not None]
    if not ended:
        return placeholder(path, title, "No trial reported its peak memory.")
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    done = [r for r in ended if r.ok and r.tokens_per_s is not None]
    groups = [("completed", {"color": "tab:blue"}, [r for r in done if feasible(r, budget_gib)]),
              ("over budget", {"facecolors": "none", "edgecolors": "tab:orange"},
               [r for r in done if not feasible(r, budget_gib)]),
              ("stopped early", {"facecolors": "none", "edgecolors": "tab:gray"},
               [r for r in ended if not r.ok and measured_tokens_per_s(r) is not None])]
    failed = [r for r in ended if not r.ok and measured_tokens_per_s(r) is None]
    for reason in sorted({r.reason_text for r in failed}):
        rs = [r for r in failed if r.reason_text == reason]
        groups.append((f"{reason} (no {rate(unit_of(records))})",
                       {"marker": "x", "color": colour(rs[0])}, rs))
    for label, style, rs in groups:
        if rs:
            ax.scatter([r.peak_memory_gib for r in rs],
                       [measured_tokens_per_s(r) or 0.0 for r in rs], zorder=3, label=label,
                       **style)
    front = pareto_front(records)
    if front:
        ax.step([r.peak_memory_gib for r in front], [r.tokens_per_s for r in front],
                where="post", color="tab:green", alpha=0.6)
        ax.scatter([r.peak_memory_gib for r in front], [r.tokens_per_s for r in front], s=140,
                   facecolors="none", edgecolors="tab:green", zorder=4, label="Pareto front")
        labels: dict[tuple[float, float], list[str]] = {}
        for r in front:  # trials on the same point share one label
            labels.setdefault((r.peak_memory_gib, r.tokens_per_s), []).append(f"#{r.number}")
        for point, names in labels.items():
            ax.annotate(", ".join(names), point, xytext=(8, 4), textcoords="offset points",
                        fontsize=9)
    budgets = {b for r in ended if (b := budget_of(r, budget_gib)) is not None}
    budget = max(budgets) if budgets else None
    top_peak = max(r.peak_memory_gib for r in ended)
    xlabel = "peak memory per rank (GiB)"
    if budget is not None and budget <= 2.0 * top_peak:
        ax.axvline(budget, color="tab:red", linestyle="--", label=f"budget {budget:.2f} GiB")
    elif budget is not None:  # far right of every point: say so instead of squashing them
        xlabel += f"; the memory budget, {budget:.2f} GiB, is far off the right edge"
    ax.set(title=title, xlabel=xlabel, ylabel=f"{rate(unit_of(records))} (steady state)")
    thousands(ax)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, path)


def knob_importance(records: list[TrialRecord]) -> dict[str, float]:
    """Per knob: the tokens/s range its values span (:func:`autotune.report.importance.spans`:
    an additive model of completed trials and slow ones at their tokens/s when stopped)."""
    return importance_of.spans(records)


def importance(records: list[TrialRecord], path: Path) -> bool:
    """Bars of each knob's effect (:func:`autotune.report.importance.effects`): the tokens/s
    range its values span and, beside it, the share of its trials stopped as slow or out of
    memory; False (and a placeholder) under 2 trials completed or stopped."""
    title = "Knob importance"
    counted = [r for r in distinct(records)
               if r.launched and (r.ok and r.tokens_per_s is not None
                                  or r.reason in importance_of.STOPPED)]
    if len(counted) < 2:
        placeholder(path, title, f"{len(counted)} trial(s) completed or stopped: importance "
                                 "needs at least 2.")
        return False
    effects = importance_of.effects(records)[::-1]  # the largest on top
    best_tps = importance_of.best_measured(records)
    n_done = sum(r.ok for r in counted)
    n_partial = len(importance_of.modelled(records)) - n_done
    any_stopped = any(e.most_stopped is not None for e in effects)
    fig = Figure(figsize=(12 if any_stopped else 8, 0.5 * len(effects) + 1.8),
                 layout="constrained")
    axes = fig.subplots(1, 2 if any_stopped else 1, sharey=True, squeeze=False).ravel()
    names = [e.knob for e in effects]
    spans = [e.span_tokens_per_s for e in effects]
    unit = rate(unit_of(records))
    ax = axes[0]
    ax.barh(names, spans, color="tab:blue")
    measured = importance_of.modelled(records)
    for i, e in enumerate(effects):
        share = f" ({100 * e.span_tokens_per_s / best_tps:.0f} % of best)" if best_tps else ""
        unmeasured = [str(v.value) for v in e.values
                      if not any(r.params.get(e.knob) == v.value for r in measured)]
        if unmeasured:  # stopped before any tokens/s: the right-hand panel has its effect
            share += f"; no {unit} for {', '.join(unmeasured)}"
        ax.annotate(f"{e.span_tokens_per_s:,.0f} {rate(unit_of(records), short=True)}{share}",
                    (e.span_tokens_per_s, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    partial = f", {n_partial} slow at their {unit} when stopped" if n_partial else ""
    ax.set(title=f"{unit} range each knob spans",
           xlabel=f"max - min of its values' effects, additive model of {unit}\n"
                  f"({n_done} completed trials{partial})")
    ax.set_xlim(0, max(max(spans) * 1.6, 1.0))
    ax.grid(axis="x", alpha=0.3)
    if any_stopped:
        _stopped_panel(axes[1], effects)
    fig.suptitle(title)
    save(fig, path)
    return True


def _stopped_panel(ax, effects: list) -> None:
    """Per knob, how far its values move the chance of a trial being stopped, split by how
    its most-stopped value's trials were stopped (slow, out of memory)."""
    slow, oom = [], []
    for e in effects:
        worst, share = e.most_stopped, 100 * e.stopped_share
        slow.append(share * worst.slow / worst.stopped if worst else 0.0)
        oom.append(share - slow[-1])
    ax.barh(range(len(effects)), slow, color=Outcome.SLOW.colour, label="stopped as slow")
    ax.barh(range(len(effects)), oom, left=slow, color=Outcome.OOM.colour,
            label="out of memory")
    for i, e in enumerate(effects):
        text = f"{100 * e.stopped_share:.0f} pts"
        if e.most_stopped is not None and e.stopped_share >= MIN_STOPPED_SHARE:
            text += f"; {e.most_stopped.text()}"
        ax.annotate(text, (slow[i] + oom[i], i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set(title="how far its values move the share of trials stopped",
           xlabel="percentage points, additive model of stopped (1) or not (0)\nover the "
                  "launched trials (100: every trial of a value stopped, none of another)")
    ax.set_xlim(0, 200)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


#: A knob's stopped share from which the figure names its most-stopped value.
MIN_STOPPED_SHARE = 0.05


def knob_effects(records: list[TrialRecord], path: Path, *,
                 cv: float = CostPriors.run_to_run_cv) -> Path:
    """Small multiples, one per knob: each pair of trials that differ in that knob alone
    (autotune/study/contrasts.py) as its gain with the 95 % interval of two runs of ``cv``
    run-to-run noise, or as a cross where one was stopped and the other completed. A knob
    no pair isolates says so: a mean over trials that changed other knobs too would show
    their effects as its own."""
    title = "Effect of each knob value, from one-knob contrasts"
    ended = _ended(records)
    knobs = sorted({k for r in ended for k in r.params})
    if not knobs:
        return placeholder(path, title, "No trial with knob values has ended yet.")
    found = pairs(records, cv=cv)
    ncols = min(3, len(knobs))
    nrows = math.ceil(len(knobs) / ncols)
    fig = Figure(figsize=(3.8 * ncols, 3.0 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, knob in zip(axes, knobs):
        of_knob = [c for c in found if c.knob == knob]
        ax.set_title(knob, fontsize=10)
        ax.axhline(0.0, color="grey", lw=0.8)
        if not of_knob:
            ax.text(0.5, 0.5, "not isolated:\nno two trials differ\nin this knob alone",
                    ha="center", va="center", fontsize=8, transform=ax.transAxes)
            ax.set_xticks([])
            continue
        for i, c in enumerate(of_knob):
            if c.gain is None:  # stopped where the other completed
                ax.scatter([i], [0.0], marker="x", s=30, color=colour(c.trial), zorder=3)
                continue
            ax.errorbar([i], [100 * c.gain], yerr=[[100 * (c.gain - c.low)],
                                                   [100 * (c.high - c.gain)]],
                        fmt="o", ms=4, color="tab:grey" if c.within_noise else "tab:blue",
                        capsize=2)
        ax.set_xticks(range(len(of_knob)),
                      [f"{c.other}→{c.value}\n#{c.reference.number}→#{c.trial.number}"
                       for c in of_knob], fontsize=7)
        ax.set_ylabel("change %", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(knobs):]:
        ax.axis("off")
    fig.suptitle(f"{title}\ndots: one trial against another that differs in this knob alone "
                 f"(grey: within noise), bars: 95 % interval of two runs at {100 * cv:.1f} % "
                 "noise; crosses: stopped (red oom, grey slow) where the other completed",
                 fontsize=9)
    return save(fig, path)
