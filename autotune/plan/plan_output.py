"""What ``python -m autotune plan`` shows and writes: plan.csv's frame, the ranked table
(rows the model cannot tell apart folded into one), the ruled-out summary, plan.md, and the
lines printed on the terminal. The verb itself is autotune/commands/plan.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pandas as pd

from autotune.plan.costmodel import CostModel
from autotune.plan.figure import plan_figure
from autotune.plan.planner import PlanPoint, plan
from autotune.presentation.tables import markdown_table
from autotune.settings import PlanSettings
from trials.contract.schema import ConfigError, TrialConfig, memory_budget_gib
from trials.contract.vocabulary import precision_name


def row(rank: int | None, point: PlanPoint) -> dict:
    j, p = point.job, point.prediction
    out = {"rank": rank, "split": j.split, "dp": j.dp, "mp": j.mp, "pp": j.pp,
           "micro_batches": j.micro_batches, "micro_batch_size": j.micro_batch_size,
           "recompute": j.recompute.value, "seq_parallel": j.sequence_parallel,
           "opt_shard": j.optimizer_shard, "precision": precision_name(j.dtype)}
    if p is not None:
        out.update({"tokens_per_s": p.tokens_per_s, "mfu": p.mfu, "step_s": p.step_s,
                    "peak_gib": p.peak_gib})
        out.update({f"mem_{k}_gib": v for k, v in p.memory.gib().items() if k != "peak"})
        if p.time is not None:
            out.update({f"time_{k}_s": v for k, v in p.time.seconds().items() if k != "step"})
    out["fits"] = point.fits
    out["tight"] = point.tight  # the budget is inside the predicted memory interval
    out["reason"] = point.reason or ""
    return out


def frame(points: list[PlanPoint]) -> pd.DataFrame:
    rank = 0
    rows = []
    for point in points:
        if point.fits:
            rank += 1
        rows.append(row(rank if point.fits else None, point))
    df = pd.DataFrame(rows)
    if not df.empty:
        df["rank"] = df["rank"].astype("Int64")
    return df


SHOWN = {"rank": "rank", "split": "dp x mp x pp", "micro_batches": "m",
         "micro_batch_size": "b", "recompute": "recompute", "seq_parallel": "SP",
         "opt_shard": "opt shard", "precision": "precision", "tokens_per_s": "tokens/s",
         "mfu": "MFU %", "peak_gib": "peak GiB", "mem_optimizer_states_gib": "states GiB",
         "mem_activations_gib": "activations GiB", "same_for": "same for"}


#: The knobs a row of the shown table may stand for several values of.
FOLDABLE = ("precision", "opt_shard", "seq_parallel", "recompute")


def collapse(fitting: pd.DataFrame) -> pd.DataFrame:
    """One row per predicted (tokens/s, peak memory): rows that differ only in knobs the
    model predicts make no difference are folded into the best-ranked one, and the
    ``same for`` column lists the values folded ("precision fp16/bf16")."""
    if fitting.empty:
        return fitting.assign(same_for="")
    key = (fitting["tokens_per_s"].round(6).astype(str) + "|"
           + fitting["peak_gib"].round(4).astype(str) + "|" + fitting["split"]
           + "|" + fitting["micro_batches"].astype(str))
    rows = []
    for _, group in fitting.groupby(key, sort=False):
        first = group.iloc[0].copy()
        folded = [f"{k} {'/'.join(str(v) for v in dict.fromkeys(group[k]))}"
                  for k in FOLDABLE if group[k].nunique() > 1]
        first["same_for"] = ", ".join(folded)
        rows.append(first)
    return pd.DataFrame(rows).sort_values("rank")


def shown_table(df: pd.DataFrame, limit: int) -> pd.DataFrame:
    top = collapse(df[df["fits"]]).head(limit)
    cols = [c for c in SHOWN if c in top.columns]
    shown = top[cols].rename(columns=SHOWN).copy()
    shown["rank"] = shown["rank"].astype(int)
    if "MFU %" in shown:
        shown["MFU %"] = shown["MFU %"] * 100
    if "states GiB" in shown:  # all model states, not only the optimizer's
        shown["states GiB"] = (top["mem_parameters_gib"] + top["mem_gradients_gib"]
                               + top["mem_optimizer_states_gib"]
                               + top["mem_accumulation_gib"]).values
    if "tight" in top:  # a predicted peak over the budget ranks only as "tight" (TIGHT_NOTE)
        shown.insert(shown.columns.get_loc("peak GiB") + 1, "fit",
                     ["tight" if t else "yes" for t in top["tight"]])
    return shown


#: What a "tight" row of the table means, said under it whenever one is shown.
TIGHT_NOTE = ("fit 'tight': the budget lies inside the predicted peak's interval (the model's "
              "memory uncertainty), so the point may run out of memory; it is kept, not "
              "ruled out, because the model may be high")


def any_tight(shown: pd.DataFrame) -> bool:
    return "fit" in shown and bool((shown["fit"] == "tight").any())


def ruled_out_summary(df: pd.DataFrame) -> pd.DataFrame:
    out = df[~df["fits"]].copy()
    if out.empty:
        return out
    out["why"] = out["reason"].str.replace(r"[\d.,]+", "N", regex=True).str.slice(0, 60)
    groups = out.groupby("why", sort=False)
    return pd.DataFrame({"points": groups.size(), "example": groups["split"].first() + " m="
                         + groups["micro_batches"].first().astype(str) + ": "
                         + groups["reason"].first()}).sort_values("points", ascending=False)


#: Plan settings that do not change what is planned (where it goes, how much is printed).
NOT_PLANNED = ("out", "show", "nodes")


def default_name(cfg: TrialConfig, settings: PlanSettings) -> str:
    """``<workload>-<hardware>-<nodes>n``, and a digest of the plan settings that differ
    from the defaults (two plans of one workload that pin other splits or precisions get
    directories of their own)."""
    name = f"{cfg.workload.name}-{cfg.hardware.name}-{settings.nodes}n"
    default = PlanSettings()
    pinned = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)
              if f.name not in NOT_PLANNED and getattr(settings, f.name) != getattr(default,
                                                                                     f.name)}
    if not pinned:
        return name
    digest = hashlib.sha256(json.dumps(pinned, sort_keys=True, default=str).encode())
    return f"{name}-{digest.hexdigest()[:8]}"


def markdown(title: str, model: CostModel, shown: pd.DataFrame, df: pd.DataFrame,
             fitting: int) -> str:
    c = model.constants
    text = (f"# Plan: {title}\n\n{fitting} of {len(df)} configurations fit. Constants: "
            f"{c.source}; the model's uncertainty (1 sigma): memory "
            f"+-{100 * c.memory_uncertainty:.0f} %, step time "
            f"+-{100 * c.time_uncertainty:.0f} %.\n\n## Best predicted configurations\n\n"
            + markdown_table(shown)
            + (f"\n{TIGHT_NOTE}.\n" if any_tight(shown) else "")
            + "\n## Ruled out\n\n")
    summary = ruled_out_summary(df)
    text += markdown_table(summary.reset_index(drop=True)) if not summary.empty else "None.\n"
    text += ("\nEvery point, with its memory and step-time breakdown: `plan.csv`. What the "
             "model does not cover: see the README (\"Planning before launch\").\n")
    return text


def batch_line(settings: PlanSettings, cfg: TrialConfig) -> str:
    if settings.global_batch is not None:
        return f"global batch {settings.global_batch} (plan.global_batch)"
    return (f"global batch {cfg.train.global_batch} (train.global_batch, the workload's "
            "default: set plan.global_batch=N to plan your job's)")


def plan_directory(cfg: TrialConfig, settings: PlanSettings, runs_dir: Path) -> Path:
    """``plan.out``, else <runs_dir>/plan/<default_name>."""
    return Path(settings.out) if settings.out else (
        runs_dir / "plan" / default_name(cfg, settings))


def make_plan(cfg: TrialConfig, settings: PlanSettings, runs_dir: Path) -> list[str]:
    """Plan ``cfg``'s workload on ``settings.nodes`` nodes of its hardware profile, write
    plan.csv, plan.md and plan.png, and return the lines to print."""
    if cfg.workload.entry:
        raise ConfigError("plan needs the model's dimensions: a user workload "
                          "(workload.entry) has none; use a preset (workload=llama2_7b ...) or "
                          "set workload.n_layers/d_model/n_heads/seq_len/vocab_size")
    hw = cfg.hardware
    out = plan_directory(cfg, settings, runs_dir)
    model = CostModel.for_profile(hw, nodes=settings.nodes)
    budget = memory_budget_gib(cfg)
    points = plan(cfg, settings, model, budget)
    df = frame(points)
    fitting = int(df["fits"].sum()) if not df.empty else 0
    shown = shown_table(df, settings.show)
    title = (f"{cfg.workload.name} on {settings.nodes} x {hw.name} ({model.cluster.devices} "
             f"devices, {budget:g} GiB each), global batch "
             f"{settings.global_batch or cfg.train.global_batch}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "plan.csv", index=False)
        (out / "plan.md").write_text(markdown(title, model, shown, df, fitting))
        plan_figure(df, out / "plan.png", title=title, budget_gib=budget)
    except OSError as exc:
        raise ConfigError(f"cannot write the plan to {out} ({exc.strerror or exc}): choose a "
                          "writable plan.out=PATH") from exc
    lines = [title, batch_line(settings, cfg),
             shown.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:,.2f}")
             if not shown.empty else "No configuration fits."]
    if any_tight(shown):
        lines.append(TIGHT_NOTE)
    c = model.constants
    lines.append(f"{fitting} of {len(df)} configurations fit; constants: {c.source} (memory "
                 f"+-{100 * c.memory_uncertainty:.0f} %, time "
                 f"+-{100 * c.time_uncertainty:.0f} %)")
    if points and points[0].prediction is not None and points[0].prediction.time is None:
        lines.append(f"step time unknown: {model.peak_problem(points[0].job.dtype)}")
    lines.append(f"plan: {out.resolve() / 'plan.md'}")
    return lines
