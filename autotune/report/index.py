"""The report's front page: summary, diagnosis, top trials, links to every file.

``index.md`` links the files next to it; ``index.html`` is the same page with the
figures embedded, so it can be mailed or opened anywhere on its own.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from autotune.presentation.labels import params_label
from autotune.presentation.tables import markdown_table
from autotune.report import where_time_goes
from autotune.report.diagnosis import Finding
from autotune.report.leaderboard import flagged_lines, frame
from autotune.report.tables import reason_counts
from autotune.report.where_time_goes import TimeSection
from autotune.study.records import TrialRecord, unit_of
from autotune.study.selection import CONFIRMED_LABEL, Verdict, pareto_front, throughput_label
from autotune.study.story import pick_sentence
from trials.contract.units import rate

#: (file, title, what it holds), in page order.
TABLES = (
    ("experiments.md", "Experiments", "every trial: start time, knob values, metrics, reason"),
    ("experiments.csv", "Experiments (CSV)", "the same table for spreadsheets and pandas"),
    ("ablation.md", "Ablation", "every pair of trials one knob apart: gain, interval, reading"),
    ("failures.md", "Failures", "counts and examples per reason"),
    ("diagnosis.md", "Diagnosis", "what to try next, with the numbers behind it"),
    ("prediction.md", "Cost model", "predicted against measured memory and throughput"),
)
FIGURES = (
    ("history.png", "Optimisation history"),
    ("memory_vs_throughput.png", "Throughput against peak memory"),
    ("importance.png", "Knob importance"),
    ("knob_effects.png", "Effect of each knob value"),
    ("prediction.png", "Cost model: predicted against measured"),
)


@dataclass
class Summary:
    """What the console and the top of the index say."""

    study: str
    storage: str  # already redacted
    objective: str
    n_trials: int
    n_launched: int
    #: Launches that count against sweep.n_trials (a run stopped under load, interrupted or
    #: orphaned is retried instead: the sweep's "launched (budget N)" counts these).
    n_counted: int
    counts: dict[str, int]
    #: The study's answers to "which trial is best" (autotune/study/selection.py); the
    #: summary is about its pick.
    verdict: Verdict
    front: list[TrialRecord]
    #: Runs measured under load, a baseline that missed its precision target.
    flagged: list[str] = field(default_factory=list)
    #: What the throughput counts (the workload's unit; None: tokens).
    unit: str | None = None
    #: What export takes and why (autotune/study/story.py): the summary's first word on it.
    story: str = ""

    @property
    def best(self) -> TrialRecord | None:
        return self.verdict.best_measured

    def lines(self) -> list[str]:
        counts = ", ".join(f"{reason} {n}" for reason, n in self.counts.items()) or "none"
        out = [f"study {self.study} in {self.storage}; objective: {self.objective}",
               f"trials: {self.n_trials} ({self.n_launched} launched"
               + (f", {self.n_counted} of them against sweep.n_trials; the others were "
                  "stopped under load, interrupted or orphaned, and re-queued"
                  if self.n_counted != self.n_launched else "") + f"): {counts}"]
        out += [self.story] if self.story else []
        pick = self.verdict.pick
        if pick is not None:
            out.append(pick_line(pick))
            out += peak_used_lines(pick)
        out += self.flagged
        out.append(f"({throughput_label(self.unit)}; confirmed = {CONFIRMED_LABEL})")
        if len(self.front) > 1:
            out.append(f"Pareto front ({rate(self.unit)} vs peak memory): "
                       + ", ".join(f"#{r.number}" for r in self.front))
        return out


def pick_line(pick: TrialRecord) -> str:
    """The pick in the sweep: its figure (the leaderboard's), then its own run's MFU and
    peak memory, and its knobs (labelled: the story's figure is confirm's where confirm
    ran)."""
    own = ", ".join(part for part in (
        None if pick.mfu is None else f"{100 * pick.mfu:.2f} % MFU",
        None if pick.peak_memory_gib is None else f"peak {pick.peak_memory_gib:.2f} GiB")
        if part)
    sim = " [SIMULATED: the cost model's prediction, not a measurement]" \
        if pick.simulated else ""
    return (f"trial #{pick.number}: {pick.sweep_figure}" + (f"; its own run: {own}" if own
                                                             else "")
            + f" ({params_label(pick.params) or 'no knobs'}){sim}")


def peak_used_lines(best: TrialRecord) -> list[str]:
    """The peak the best trial's MFU divides by, and how it was measured; or why that
    trial has no MFU (the column shows none rather than a number from a wrong peak)."""
    perf = best.perf
    if perf.mfu_unavailable:
        # Its own: a later trial, run once a verified peak was cached, has one in the table.
        return [f"MFU of trial #{best.number}: not available ({perf.mfu_unavailable})"]
    if perf.mfu is None or not perf.peak_flops:
        return []
    how = perf.peak_source or "how it was measured is not recorded (a trial of an older version)"
    return [f"MFU peak: {perf.peak_flops / 1e9:,.1f} GFLOP/s ({how})"]


def summarise(records: list[TrialRecord], *, study: str, storage: str, n_objectives: int,
              budget_gib: float | None, verdict: Verdict) -> Summary:
    budget = "?" if budget_gib is None else f"{budget_gib:.2f}"
    unit = unit_of(records)
    objective = (f"max {rate(unit)} with peak memory <= {budget} GiB" if n_objectives == 1 else
                 f"Pareto: max {rate(unit)}, min peak memory (budget {budget} GiB)")
    return Summary(study=study, storage=storage, objective=objective, n_trials=len(records),
                   n_launched=sum(r.launched for r in records),
                   n_counted=sum(r.counts_as_launch for r in records),
                   counts=dict(reason_counts(records).most_common()),
                   verdict=verdict, front=pareto_front(records),
                   flagged=flagged_lines(records), unit=unit,
                   story=pick_sentence(verdict, records))


def _top(records: list[TrialRecord], n: int = 5) -> pd.DataFrame:
    return frame(records).head(n)


def render_markdown(summary: Summary, records: list[TrialRecord],
                    findings: list[Finding], time_goes: TimeSection | None = None,
                    extra: list[str] = ()) -> str:
    """``extra``: more markdown sections (tuning stages, stability) after the top trials."""
    text = [f"# Tuning report: {summary.study}", "",
            f"Generated {dt.datetime.now().isoformat(timespec='seconds')}.", ""]
    text += [f"- {line}" for line in summary.lines()] + [""]
    text += ["## Diagnosis", ""] + [f"- {f.sentence}" for f in findings] + [""]
    text += ["## Top trials", "", markdown_table(_top(records))]
    if time_goes is not None:
        text += where_time_goes.markdown(time_goes)
    text += [*extra, ""] if extra else []
    text += ["## Tables", ""] + [f"- [{title}]({name}): {what}" for name, title, what in TABLES]
    text += ["", "The same page with the figures embedded: [index.html](index.html).", ""]
    for name, title in FIGURES:
        text += [f"## {title}", "", f"[![{title}]({name})]({name})", ""]
    return "\n".join(text)


def render_html(summary: Summary, records: list[TrialRecord], findings: list[Finding],
                out: Path, time_goes: TimeSection | None = None,
                extra: list[str] = ()) -> str:
    """The same page with every figure embedded as a data URL."""
    e = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>Tuning report: {e(summary.study)}"
             "</title><style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
             "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;"
             "padding:2px 6px;text-align:right}img{max-width:100%}</style>",
             f"<h1>Tuning report: {e(summary.study)}</h1><ul>"]
    parts += [f"<li>{e(line)}</li>" for line in summary.lines()]
    parts += ["</ul><h2>Diagnosis</h2><ul>"] + [f"<li>{e(f.sentence)}</li>" for f in findings]
    parts += ["</ul><h2>Top trials</h2>", _top(records).to_html(index=False, na_rep="-",
                                                                float_format="{:,.2f}".format)]
    if time_goes is not None:
        parts += where_time_goes.html_lines(time_goes, _data_url(out / time_goes.figure)
                                            if time_goes.figure else None)
    if extra:
        parts.append(f"<pre>{e(chr(10).join(extra))}</pre>")
        if (out / "soak.png").is_file():
            parts.append(f"<img alt='Soak' src='{_data_url(out / 'soak.png')}'>")
    parts += ["<h2>Tables</h2><ul>"] + [f"<li><a href='{name}'>{e(title)}</a>: {e(what)}</li>"
                                        for name, title, what in TABLES] + ["</ul>"]
    for name, title in FIGURES:
        parts.append(f"<h2>{e(title)}</h2><img alt='{e(title)}' src='{_data_url(out / name)}'>")
    return "\n".join(parts) + "\n"


def _data_url(path: Path) -> str:
    return f"data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}"
