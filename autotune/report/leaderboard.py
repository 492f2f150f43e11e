"""The table at the end of a sweep (and the start of a report): one row per configuration."""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from autotune.presentation.labels import short
from autotune.study.records import TrialRecord
from autotune.study.selection import BASELINE_ROLE, CONFIRMED_LABEL, TOKENS_PER_S_LABEL

#: The column of gains over the baseline with their 95 % interval, in percent.
GAIN_COLUMN = "vs base % (95% CI)"
#: The column of confirm's medians (only when confirm has run).
CONFIRMED_COLUMN = "confirmed tok/s"
#: The column of proposals a row stands for (only when a proposal was reused).
PROPOSALS_COLUMN = "proposals"

def frame(records: list[TrialRecord], *, knobs: list[str] | None = None) -> pd.DataFrame:
    """Trials as a DataFrame, best tokens/s first, then the rest by trial number.

    A reused copy (a repeated proposal settled with an earlier trial's result, never
    launched) has no row of its own: it is folded into the row of the trial it reused,
    and PROPOSALS_COLUMN (shown once any copy exists) counts the proposals each row
    stands for."""
    knobs = knobs or sorted({k for r in records for k in r.params})
    any_confirmed = any(r.confirmed_tokens_per_s for r in records)
    numbers = {r.number for r in records}
    copies = Counter(r.reused_from for r in records if r.reused_from in numbers)
    rows = []
    for r in records:
        if r.reused_from in numbers:
            continue  # folded into the row of the trial it reused
        row = {"trial": r.number}
        row.update({short(k): r.params.get(k) for k in knobs})
        reason = r.reason_text + (" (simulated)" if r.simulated else "")
        if r.reused_from is not None:
            reason += f" (=#{r.reused_from})"
        row.update({
            # THE tokens/s of the trial (TOKENS_PER_S_LABEL): what the report and export say.
            "tokens/s": r.tokens_per_s,
            **({CONFIRMED_COLUMN: r.confirmed_tokens_per_s} if any_confirmed else {}),
            "runs": r.n_runs if r.tokens_per_s is not None else None,
            **({PROPOSALS_COLUMN: 1 + copies[r.number]} if copies else {}),
            # Filled by autotune.study.selection.annotate; "~" marks a gain within noise.
            GAIN_COLUMN: ("baseline" if r.role == BASELINE_ROLE and r.reused_from is None
                          else r.vs_baseline.short() if r.vs_baseline is not None
                          else math.nan),
            "MFU %": None if r.mfu is None else 100 * r.mfu,
            "peak GiB": r.peak_memory_gib, "step s": r.step_time_s, "compile s": r.compile_s,
            "state": r.state, "reason": reason,
        })
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    # Whole numbers where measured, blank (NaN) elsewhere, not 1.00.
    df["runs"] = pd.Series([math.nan if pd.isna(v) else int(v) for v in df["runs"]],
                           dtype=object, index=df.index)
    df["_ok"] = df["tokens/s"].notna()
    df = df.sort_values(["_ok", "tokens/s", "trial"], ascending=[False, False, True])
    return df.drop(columns="_ok").reset_index(drop=True)


def render(records: list[TrialRecord], *, limit: int = 20, noise_note: str = "") -> str:
    df = frame(records)
    if df.empty:
        return "(no trials)"
    shown = df.head(limit)
    text = shown.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:,.2f}")
    if len(df) > limit:
        text += f"\n... {len(df) - limit} more (python -m autotune report)"
    text += f"\n{TOKENS_PER_S_LABEL}; runs = runs of the configuration the gains rest on"
    if CONFIRMED_COLUMN in df.columns:
        text += f"; {CONFIRMED_COLUMN} = {CONFIRMED_LABEL}"
    if PROPOSALS_COLUMN in df.columns:
        text += (f"; {PROPOSALS_COLUMN} = times the sampler proposed the configuration "
                 "(repeats reuse the result, launch nothing)")
    if noise_note:
        text += f"\n{noise_note}"
    return text


def noise_line(level) -> str:
    """What the gain column rests on (a :class:`~autotune.study.noise.Noise`)."""
    return (f"gains: 95 % intervals, bootstrap over measured steps + run-to-run noise "
            f"{100 * level.cv:.1f} % ({level.source}); ~ = within noise "
            "(python -m autotune confirm re-measures the finalists against the baseline)")
