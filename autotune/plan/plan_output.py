"""What ``python -m autotune plan`` shows and writes: plan.csv's frame, the ranked table
(rows the model cannot tell apart folded into one), the ruled-out summary, plan.md, and the
lines printed on the terminal. The verb itself is autotune/commands/plan.py."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from autotune.plan.costmodel import CostModel
from autotune.plan.coverage import dtype_coverage
from autotune.plan.figure import breakdown_figure, plan_figure, point_label
from autotune.plan.planner import PlanPoint, dtypes, plan
from autotune.plan.predict import Constants, memory_interval
from autotune.presentation.tables import markdown_table, text_table
from autotune.settings import PlanSettings
from autotune.study.layout import named_by
from trials.contract.schema import ConfigError, TrialConfig, memory_budget_gib
from trials.contract.vocabulary import precision_name


def row(rank: int | None, point: PlanPoint) -> dict:
    j, p = point.job, point.prediction
    out = {"rank": rank, "split": j.split, "dp": j.dp, "mp": j.mp, "pp": j.pp,
           "micro_batches": j.micro_batches, "micro_batch_size": j.micro_batch_size,
           "recompute": j.recompute.value, "seq_parallel": j.sequence_parallel,
           "opt_shard": j.optimizer_shard, "precision": precision_name(j.dtype)}
    # Every row has the predicted columns (None where nothing was predicted), so that a
    # plan whose points are all ruled out before a prediction has a frame like any other.
    out.update({"tokens_per_s": None, "mfu": None, "step_s": None, "peak_gib": None})
    if p is not None:
        out.update({"tokens_per_s": p.tokens_per_s, "mfu": p.mfu, "step_s": p.step_s,
                    "peak_gib": p.peak_gib})
        out.update({f"mem_{k}_gib": v for k, v in p.memory.gib().items() if k != "peak"})
        if p.time is not None:
            out.update({f"time_{k}_s": v for k, v in p.time.seconds().items() if k != "step"})
    out["fits"] = point.fits
    out["tight"] = point.tight  # the budget is inside the predicted memory interval
    out["reason"] = point.reason or ""
    out["flags"] = "; ".join(point.flags)  # planned, but unusual (uneven stages, ...)
    return out


def frame(points: list[PlanPoint]) -> pd.DataFrame:
    """plan.csv's rows, best first. A fitting row's rank is its prediction's: rows the
    model predicts alike (:func:`fold_key`: fp16 and bf16 on an A100) share one, so the
    ranks the table shows after folding them run 1, 2, 3."""
    df = pd.DataFrame([row(None, point) for point in points])
    if not df.empty:
        for col in ("tokens_per_s", "mfu", "step_s", "peak_gib"):  # None where unknown
            df[col] = pd.to_numeric(df[col], errors="coerce")
        fits = df["fits"].astype(bool)
        df["rank"] = pd.array([pd.NA] * len(df), dtype="Int64")
        if fits.any():
            df.loc[fits, "rank"] = pd.factorize(fold_key(df[fits]))[0] + 1
    return df


def fold_key(rows: pd.DataFrame) -> pd.Series:
    """Rows that differ only in knobs the model predicts make no difference: the same
    tokens/s and peak memory, split and micro-batches."""
    return (rows["tokens_per_s"].round(6).astype(str) + "|"
            + rows["peak_gib"].round(4).astype(str) + "|" + rows["split"]
            + "|" + rows["micro_batches"].astype(str))


SHOWN = {"rank": "rank", "split": "dp x mp x pp", "micro_batches": "m",
         "micro_batch_size": "b", "recompute": "recompute", "seq_parallel": "SP",
         "opt_shard": "opt shard", "precision": "precision", "tokens_per_s": "tokens/s",
         "step_s": "step s", "mfu": "MFU %", "peak_gib": "peak GiB",
         "mem_optimizer_states_gib": "states GiB", "mem_activations_gib": "activations GiB",
         "flags": "note", "same_for": "same for"}


#: The knobs a row of the shown table may stand for several values of.
FOLDABLE = ("precision", "opt_shard", "seq_parallel", "recompute")


def collapse(fitting: pd.DataFrame) -> pd.DataFrame:
    """One row per predicted (tokens/s, peak memory): rows that differ only in knobs the
    model predicts make no difference are folded into the best-ranked one, and the
    ``same for`` column lists the values folded ("precision fp16/bf16")."""
    if fitting.empty:
        return fitting.assign(same_for="")
    rows = []
    for _, group in fitting.groupby(fold_key(fitting), sort=False):
        first = group.iloc[0].copy()
        folded = [f"{k} {'/'.join(str(v) for v in dict.fromkeys(group[k]))}"
                  for k in FOLDABLE if group[k].nunique() > 1]
        first["same_for"] = ", ".join(folded)
        rows.append(first)
    return pd.DataFrame(rows).sort_values("rank")


def shown_table(df: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The ranked table: the best ``limit`` fitting rows (folded), their step time and MFU;
    an empty frame when nothing fits."""
    if df.empty or not df["fits"].any():
        return pd.DataFrame()
    top = collapse(df[df["fits"]]).head(limit)
    return readable(top)


def readable(top: pd.DataFrame) -> pd.DataFrame:
    """plan.csv rows as the tables show them."""
    cols = [c for c in SHOWN if c in top.columns]
    shown = top[cols].rename(columns=SHOWN).copy()
    if "rank" in shown and shown["rank"].notna().all():
        shown["rank"] = shown["rank"].astype(int)
    for col in ("tokens/s", "step s", "MFU %", "peak GiB"):
        if col in shown:
            shown[col] = pd.to_numeric(shown[col], errors="coerce")
    if "MFU %" in shown:
        shown["MFU %"] = shown["MFU %"] * 100
    if "states GiB" in shown:  # all model states, not only the optimizer's
        shown["states GiB"] = (top["mem_parameters_gib"] + top["mem_gradients_gib"]
                               + top["mem_optimizer_states_gib"]
                               + top["mem_accumulation_gib"]).values
    if "note" in shown and not (shown["note"] != "").any():
        shown = shown.drop(columns="note")
    if "same for" in shown and not (shown["same for"] != "").any():
        shown = shown.drop(columns="same for")
    if "tight" in top and "peak GiB" in shown and top["fits"].all():
        # a predicted peak over the budget ranks only as "tight" (TIGHT_NOTE)
        shown.insert(shown.columns.get_loc("peak GiB") + 1, "fit",
                     ["tight" if t else "yes" for t in top["tight"]])
    return shown


#: What a "tight" row of the table means, said under it whenever one is shown.
TIGHT_NOTE = ("fit 'tight': the budget lies inside the predicted peak's interval (the model's "
              "memory uncertainty), so the point may run out of memory; it is kept, not "
              "ruled out, because the model may be high")


def any_tight(shown: pd.DataFrame) -> bool:
    return "fit" in shown and bool((shown["fit"] == "tight").any())


def reason_class(reason: str) -> str:
    """The class of a ruled-out point's reason: "memory over the budget" for every
    breakdown that exceeds it, else the reason with its numbers as N."""
    if re.search(r"> [\d.,]+ GiB$", reason):
        return "predicted peak memory over the budget (even at the interval's optimistic end)"
    return re.sub(r"\d[\d.,]*", "N", reason)


def ruled_out_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per class of reason (:func:`reason_class`): how many points, one example."""
    out = df[~df["fits"]].copy() if not df.empty else df
    if out.empty:
        return pd.DataFrame()
    out["why"] = out["reason"].map(reason_class)
    groups = out.groupby("why", sort=False)
    first = groups.head(1).set_index("why")
    return pd.DataFrame({"points": groups.size(),
                         "example": first.apply(point_label, axis=1) + ": "
                         + first["reason"]}).sort_values(
        "points", ascending=False, kind="stable").rename_axis("ruled out because").reset_index()


#: How many of the closest configurations a plan where nothing fits shows.
CLOSEST = 5


def nearest_over_budget(df: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The predicted points ruled out by memory, least memory first (one per split, m and
    peak: the knobs the model predicts make no difference are folded)."""
    if df.empty or "peak_gib" not in df:
        return df.iloc[0:0]
    over = df[~df["fits"]].dropna(subset=["peak_gib"])
    return over.sort_values("peak_gib", kind="stable").drop_duplicates(
        ["split", "micro_batches", "peak_gib"]).head(limit)


def closest(df: pd.DataFrame, budget_gib: float, limit: int = CLOSEST) -> pd.DataFrame:
    """When nothing fits: the configurations nearest to fitting, each with what it lacks.
    First the predicted ones, least memory over the budget first (at the optimistic end of
    the interval the guard applies); then, where fewer than ``limit``, one of each reason
    that rules a point out before any prediction."""
    if df.empty:
        return pd.DataFrame()
    out = df[~df["fits"]].copy()
    predicted = nearest_over_budget(df, limit)
    low = 1 - memory_interval()
    lacks = [f"{p * low - budget_gib:,.1f} GiB of memory: needs at least {p * low:,.1f} GiB "
             f"(predicted {p:,.1f} -{100 * memory_interval():.0f} %); {r}"
             for p, r in zip(predicted["peak_gib"], predicted["reason"])]
    rows = predicted.assign(lacks=lacks)
    if len(rows) < limit:
        unpredicted = out[out["peak_gib"].isna()] if "peak_gib" in out else out
        unpredicted = unpredicted.assign(why=unpredicted["reason"].map(reason_class))
        unpredicted = unpredicted.drop_duplicates("why").head(limit - len(rows))
        rows = pd.concat([rows, unpredicted.assign(lacks=unpredicted["reason"])])
    shown = readable(rows.drop(columns=["rank"]))
    shown["what it lacks"] = rows["lacks"].values
    shown = shown.drop(columns=[c for c in ("states GiB", "activations GiB", "b")
                                if c in shown])
    return shown.dropna(axis="columns", how="all")


#: Plan settings that do not change what is planned (where it goes, how much is printed).
NOT_PLANNED = ("out", "show", "nodes")


def shaping_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that change what is planned beyond what the plan's name says (the
    workload and hardware chosen, the nodes) and its settings carry by value (``plan.*``):
    ``hardware.inter_node.bandwidth_gbs=6.25``, ``workload.n_layers=70``... (``sweep.*``
    says where runs go, not what is planned)."""
    def elsewhere(override: str) -> bool:
        key = override.partition("=")[0].lstrip("+~")
        return key in ("workload", "hardware") or key.startswith(("plan.", "sweep.", "hydra."))

    return sorted(o for o in overrides if not elsewhere(o))


def default_name(cfg: TrialConfig, settings: PlanSettings, overrides: Sequence[str] = (),
                 constants: str = "") -> str:
    """``<workload>-<hardware>-<nodes>n``, and a digest of what else shapes the plan: the
    plan settings that differ from the defaults, the other overrides
    (:func:`shaping_overrides`) and ``constants``, the fit's source where one is used (a
    calibrated plan overwrote the uncalibrated one of the same command). Two plans that
    differ in anything planned get directories of their own (a cluster's own links, a
    model's other depth, other pinned splits, other constants)."""
    name = f"{cfg.workload.name}-{cfg.hardware.name}-{settings.nodes}n"
    planned, default = resolved(settings, cfg), resolved(PlanSettings(), cfg)
    pinned = {key: value for key, value in planned.items() if value != default[key]}
    shaping = shaping_overrides(overrides)
    if shaping:
        pinned["overrides"] = shaping
    if constants:
        pinned["constants"] = constants
    return named_by(name, pinned)


def resolved(settings: PlanSettings, cfg: TrialConfig) -> dict:
    """What a plan's settings plan, spelling aside: each list as the set it enumerates
    (plan.split=[2x4x1,8x1x1] plans what [8x1x1,2x4x1] does) and the global batch as the
    one planned (unset: the workload's train.global_batch)."""
    out = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if f.name in NOT_PLANNED:
            continue
        if isinstance(value, list):
            value = sorted({str(v) for v in value})
        out[f.name] = value
    out["global_batch"] = settings.global_batch or cfg.train.global_batch
    return out


def constants_line(model: CostModel, fitting: int, total: int) -> str:
    c = model.constants
    return (f"{fitting:,} of {total:,} configurations fit; constants: {c.source}; memory "
            f"+-{100 * memory_interval():.0f} % (the interval the memory rule applies: ruled "
            "out when even its low end is over the budget, tight when the budget is inside "
            f"it), step time +-{100 * c.time_uncertainty:.0f} %")


def ruled_out_lines(summary: pd.DataFrame) -> list[str]:
    """The count of ruled-out points per reason, one line each, with one of them as an
    example (its numbers: a class alone reads "the nearest that is: N")."""
    if summary.empty:
        return []
    total = int(summary["points"].sum())
    return [f"ruled out ({total:,}), by reason:"] + [
        f"  {int(r['points']):>6,}  {r['ruled out because']}; e.g. {r['example']}"
        for _, r in summary.iterrows()]


def markdown(title: str, model: CostModel, shown: pd.DataFrame, df: pd.DataFrame,
             fitting: int, *, near: pd.DataFrame, notes: list[str]) -> str:
    text = f"# Plan: {title}\n\n{constants_line(model, fitting, len(df))}.\n\n"
    text += "".join(f"- {note}\n" for note in notes) + ("\n" if notes else "")
    if shown.empty:
        text += ("## No configuration fits\n\nThe closest configurations, and what each "
                 "lacks:\n\n" + (markdown_table(near) if not near.empty else "None.\n"))
    else:
        text += ("## Best predicted configurations\n\n" + markdown_table(shown)
                 + (f"\n{TIGHT_NOTE}.\n" if any_tight(shown) else ""))
    text += ("\nWhere each one's step time goes (compute, recompute, each collective, the "
             "bubble): `breakdown.png`.\n\n## Ruled out\n\n")
    summary = ruled_out_summary(df)
    text += markdown_table(summary) if not summary.empty else "None.\n"
    text += ("\nEvery point, with its memory and step-time breakdown: `plan.csv`. What the "
             "model does not cover: the documentation's \"The cost model\" "
             "(docs/explanation/cost-model.md).\n")
    return text


def batch_line(settings: PlanSettings, cfg: TrialConfig) -> str:
    if settings.global_batch is not None:
        return f"global batch {settings.global_batch} (plan.global_batch)"
    return (f"global batch {cfg.train.global_batch} (train.global_batch, the workload's "
            "default: set plan.global_batch=N to plan your job's)")


def plan_directory(cfg: TrialConfig, settings: PlanSettings, runs_dir: Path,
                   overrides: Sequence[str] = (), constants: str = "") -> Path:
    """``plan.out``, else <runs_dir>/plan/<default_name>."""
    return Path(settings.out) if settings.out else (
        runs_dir / "plan" / default_name(cfg, settings, overrides, constants))


def make_plan(cfg: TrialConfig, settings: PlanSettings, runs_dir: Path,
              overrides: Sequence[str] = ()) -> list[str]:
    """Plan ``cfg``'s workload on ``settings.nodes`` nodes of its hardware profile, write
    plan.csv, plan.md, plan.png and breakdown.png, and return the lines to print. A plan
    where nothing fits is an answer (the closest configurations, what each lacks), not an
    error. ``overrides``: the command's, which name the plan's directory and are stated."""
    if cfg.workload.entry:
        raise ConfigError(f"plan needs the model's dimensions: workload {cfg.workload.name} "
                          f"is built by a program of its own (workload.entry="
                          f"{cfg.workload.entry}), whose dimensions plan cannot read; plan a "
                          "preset of the same shape (workload=llama2_7b ...), or give them "
                          "without the program: workload.entry='' workload.n_layers=... "
                          "d_model, n_heads, seq_len, vocab_size")
    hw = cfg.hardware
    model, priors = CostModel.for_profile(hw, nodes=settings.nodes), Constants.priors(hw)
    fit = model.constants.source if model.constants.source != priors.source else ""
    out = plan_directory(cfg, settings, runs_dir, overrides, fit)
    coverage = dtype_coverage(model.constants, priors, hw, dtypes(cfg, settings))
    model = dataclasses.replace(model, constants=coverage.constants)
    budget = memory_budget_gib(cfg)
    points = plan(cfg, settings, model, budget)
    df = frame(points)
    fitting = int(df["fits"].sum()) if not df.empty else 0
    shown = shown_table(df, settings.show)
    near = closest(df, budget) if shown.empty else pd.DataFrame()
    title = (f"{cfg.workload.name} on {settings.nodes} x {hw.name} ({model.cluster.devices} "
             f"devices, {budget:g} GiB each), global batch "
             f"{settings.global_batch or cfg.train.global_batch}")
    notes = list(coverage.notes)
    if shaping_overrides(overrides):
        notes.append(f"overrides: {' '.join(shaping_overrides(overrides))}")
    if points and points[0].prediction is not None and points[0].prediction.time is None:
        notes.append(f"step time unknown: {model.peak_problem(points[0].job.dtype)}")
    charted = (collapse(df[df["fits"]]).head(min(settings.show, 10)) if fitting
               else nearest_over_budget(df, CLOSEST))
    try:
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "plan.csv", index=False)
        (out / "plan.md").write_text(markdown(title, model, shown, df, fitting, near=near,
                                              notes=notes))
        plan_figure(df, out / "plan.png", title=title, budget_gib=budget)
        breakdown_figure(charted, out / "breakdown.png",
                         title=f"{title}: predicted step time of the "
                               + ("best configurations" if fitting else "closest ones"))
    except OSError as exc:
        raise ConfigError(f"cannot write the plan to {out} ({exc.strerror or exc}): choose a "
                          "writable plan.out=PATH") from exc
    lines = [title, batch_line(settings, cfg)]
    if shown.empty:
        lines.append("No configuration fits. The closest, and what each lacks:")
        lines.append(text_table(near) if not near.empty else "(no configuration was enumerated)")
    else:
        lines.append(text_table(shown))
        if any_tight(shown):
            lines.append(TIGHT_NOTE)
    lines.extend(ruled_out_lines(ruled_out_summary(df)))
    lines.append(constants_line(model, fitting, len(df)))
    lines.extend(notes)
    lines.append(f"plan: {out.resolve() / 'plan.md'} (step-time breakdown: breakdown.png)")
    return lines
