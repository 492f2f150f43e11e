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
from autotune.study.records import TrialRecord
from autotune.study.selection import baseline, distinct
from trials.contract.outcomes import Outcome

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


def ablation(records: list[TrialRecord]) -> pd.DataFrame:
    """Trials that change exactly one knob of the baseline, with the change they made."""
    base = baseline(records)
    if base is None:
        return pd.DataFrame()
    rows = []
    for r in distinct(records):
        changed = [k for k in sorted(set(r.params) | set(base.params))
                   if r.params.get(k) != base.params.get(k)]
        if r.number == base.number or len(changed) != 1:
            continue
        knob = changed[0]
        change = peak_change = None
        if r.tokens_per_s is not None and base.tokens_per_s:
            change = 100.0 * (r.tokens_per_s / base.tokens_per_s - 1.0)
        if r.peak_memory_gib is not None and base.peak_memory_gib is not None:
            peak_change = r.peak_memory_gib - base.peak_memory_gib
        rows.append({"knob": knob, "baseline": base.params.get(knob), "new": r.params.get(knob),
                     "trial": r.number, r.rate: r.tokens_per_s, "change %": change,
                     "peak change GiB": peak_change, "reason": r.reason_text})
    df = pd.DataFrame(rows)
    return df.sort_values(["knob", "trial"]).reset_index(drop=True) if rows else df


def ablation_markdown(records: list[TrialRecord]) -> str:
    base = baseline(records)
    head = "# One knob at a time, from the baseline\n\n"
    if base is None:
        return head + "None: the study has no baseline trial (role=baseline).\n"
    df = ablation(records)
    tps = "-" if base.tokens_per_s is None else f"{base.tokens_per_s:,.0f} {base.rate}"
    peak = "-" if base.peak_memory_gib is None else f"{base.peak_memory_gib:.3f} GiB"
    text = (head + f"Baseline: trial #{base.number} ({base.reason_text}; {tps}, peak {peak}).\n\n")
    if df.empty:
        return text + ("None: no trial differs from the baseline in exactly one knob "
                       "(`sweep.neighbours=true` runs them first).\n")
    return text + markdown_table(df)


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
