"""The report's tables: experiments, one-knob-at-a-time ablation, failure taxonomy.

Which trials count, fit and win is :mod:`autotune.study.selection`'s answer, the
same one the sweep, ``confirm`` and ``export`` use.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from autotune.presentation.labels import short
from autotune.presentation.tables import cell, markdown_table
from autotune.report.leaderboard import frame
from autotune.study.contrasts import Contrast, pairs
from autotune.study.records import TrialRecord
from autotune.study.selection import baseline
from trials.contract.outcomes import Outcome
from trials.contract.schema import CostPriors

#: States that have no reason yet, for readers of failures.md.
NO_REASON_YET = {"running": "still running", "waiting": "queued; not started yet"}



def meaning(reason_text: str) -> str:
    """What a reason (or a state without one) means, in one phrase."""
    if reason_text in NO_REASON_YET:
        return NO_REASON_YET[reason_text]
    return Outcome.parse(reason_text).label


def reason_counts(records: list[TrialRecord]) -> Counter:
    return Counter(r.reason_text for r in records)


# --- tables -------------------------------------------------------------------------------

def experiments(records: list[TrialRecord]) -> pd.DataFrame:
    """One row per trial in trial order: start time, knob values, metrics, state, reason
    (a reused copy folded into the trial it reused: :func:`leaderboard.frame`)."""
    df = frame(records)
    if df.empty:
        return pd.DataFrame(columns=["trial", "started", "tokens/s", "MFU %", "peak GiB",
                                     "step s", "compile s", "state", "reason", "role"])
    by_number = {r.number: r for r in records}
    started = {n: r.started.strftime("%Y-%m-%d %H:%M:%S") if r.started else None
               for n, r in by_number.items()}
    df.insert(1, "started", df["trial"].map(started))
    df["role"] = df["trial"].map({n: r.role for n, r in by_number.items()})
    return df.sort_values("trial").reset_index(drop=True)


def knob_legend(records: list[TrialRecord]) -> str:
    knobs = sorted({k for r in records for k in r.params})
    return ", ".join(f"`{short(k)}` = `{k}`" for k in knobs)


def reading(c: Contrast) -> str:
    """What one contrast says, in a word or two."""
    if c.gain is None:
        return f"stopped it ({c.trial.reason_text})"
    if c.within_noise:
        return "within noise"
    return "slower" if c.slower else "faster"


def ablation(records: list[TrialRecord], *, cv: float = CostPriors.run_to_run_cv
             ) -> pd.DataFrame:
    """Every pair of trials one knob apart, once (:func:`autotune.study.contrasts.pairs`:
    read from the baseline's value where one side has it; a stop against the trial that
    completed), with its gain, the gain's 95 % interval from run-to-run noise ``cv``, and
    what it says."""
    rows = []
    for c in pairs(records, cv=cv):
        peak_change = None
        if c.trial.peak_memory_gib is not None and c.reference.peak_memory_gib is not None:
            peak_change = c.trial.peak_memory_gib - c.reference.peak_memory_gib
        rows.append({"knob": c.knob, "trial": c.trial.number, "against": c.reference.number,
                     "from": c.other, "to": c.value,
                     "change %": None if c.gain is None else 100.0 * c.gain,
                     "95 % interval": "" if c.low is None else
                     f"{100 * c.low:+.1f}..{100 * c.high:+.1f}",
                     "reads": reading(c), "peak change GiB": peak_change,
                     "reason": c.trial.reason_text})
    df = pd.DataFrame(rows)
    return df.sort_values(["knob", "trial", "against"]).reset_index(drop=True) if rows else df


def ablation_markdown(records: list[TrialRecord], *, cv: float = CostPriors.run_to_run_cv
                      ) -> str:
    base = baseline(records)
    head = "# One knob at a time: every pair of trials that differ in one knob\n\n"
    text = head
    if base is not None:
        tps = "-" if base.standing is None else base.sweep_figure
        peak = "-" if base.peak_memory_gib is None else f"{base.peak_memory_gib:.3f} GiB"
        text += f"Baseline: trial #{base.number} ({base.reason_text}; {tps}, peak {peak}).\n\n"
    df = ablation(records, cv=cv)
    if df.empty:
        return text + ("None: no two trials differ in exactly one knob "
                       "(`sweep.neighbours=true` runs each one-knob change of the baseline "
                       "first).\n")
    return text + ("Each gain between two completed trials is over all their runs measured "
                   "alike, as the leaderboard and the pick compare them (the study's "
                   f"run-to-run noise; {100 * cv:.1f} % where it has too few repeats); a trial "
                   "stopped as slow is its one run against the other's. These pairs are the "
                   "only evidence the diagnosis names a cause on.\n\n") + markdown_table(df)


def failures(records: list[TrialRecord], *, n_examples: int = 3) -> list[dict[str, Any]]:
    """Per reason other than ok: how many, in which states, and a few examples."""
    out = []
    for reason, count in reason_counts(records).most_common():
        if reason == Outcome.OK.value:
            continue
        rs = [r for r in records if r.reason_text == reason]
        out.append({"reason": reason, "trials": count,
                    "launched": sum(r.launched for r in rs),
                    "state": ", ".join(sorted({r.state for r in rs})),
                    "meaning": meaning(reason),
                    "examples": [(r.number, r.detail) for r in rs[:n_examples]]})
    return out


def failures_markdown(records: list[TrialRecord]) -> str:
    rows = failures(records)
    text = "# Failure taxonomy\n\n"
    if not rows:
        return text + "None: no trial failed.\n"
    table = pd.DataFrame([{k: v for k, v in row.items() if k != "examples"} for row in rows])
    text += markdown_table(table) + "\n"
    for row in rows:
        text += f"## {row['reason']} ({row['trials']})\n\n"
        for number, detail in row["examples"]:
            text += f"- trial #{number}: {cell('detail', detail or '(no detail)')}\n"
        text += "\n"
    return text
