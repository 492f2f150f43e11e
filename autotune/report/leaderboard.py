"""The table at the end of a sweep (and the start of a report): one row per configuration."""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from autotune.presentation.invocation import autotune_command
from autotune.presentation.labels import short
from autotune.presentation.tables import text_table
from autotune.study.noise import Gain
from autotune.study.records import TrialRecord, unit_of
from autotune.study.selection import (
    BASELINE_ROLE,
    CONFIRMED_LABEL,
    baseline,
    budget_of,
    headroom_gib,
    known_slower,
    throughput_label,
)
from trials.contract.units import rate

#: The column of gains over the baseline with their 95 % interval, in percent.
GAIN_COLUMN = "vs base % (95% CI)"
#: The column of confirm's medians (only when confirm has run).
CONFIRMED_COLUMN = "confirmed tok/s"
#: The column of confirm's paired within-round gains (only for the finalists it tested).
CONFIRMED_GAIN_COLUMN = "confirmed vs base % (paired)"
CONFIRMED_GAIN_LABEL = ("confirm's paired test against the baseline re-measured in the same "
                        "rounds (the finalists only; the others show only the sweep's figure)")
#: The column of proposals a row stands for (only when a proposal was reused).
PROPOSALS_COLUMN = "proposals"
#: The column of what a reader must know about a row's figures (only when a row has any):
#: "load 1.3" (measured while other processes used 1.3 cores), "imprecise" (the baseline
#: missed its precision target).
FLAGS_COLUMN = "flags"

def frame(records: list[TrialRecord], *, knobs: list[str] | None = None) -> pd.DataFrame:
    """Trials as a DataFrame, best tokens/s first, those separably slower than the baseline
    after the rest (:func:`known_slower`: by their runs pooled across loads they may
    read faster), then what did not complete, by trial number.

    A reused copy (a repeated proposal settled with an earlier trial's result, never
    launched) has no row of its own: it is folded into the row of the trial it reused,
    and PROPOSALS_COLUMN (shown once any copy exists) counts the proposals each row
    stands for."""
    knobs = knobs or sorted({k for r in records for k in r.params})
    any_confirmed = any(r.confirmed_tokens_per_s for r in records)
    numbers = {r.number for r in records}
    copies = Counter(r.reused_from for r in records if r.reused_from in numbers)
    any_flagged = any(r.flags for r in records)
    rows = []
    for r in records:
        if r.reused_from in numbers:
            continue  # folded into the row of the trial it reused
        row = {"trial": r.number, "_slower": known_slower(r)}
        row.update({short(k): r.params.get(k) for k in knobs})
        reason = r.reason_text + (" (simulated)" if r.simulated else "")
        if r.reused_from is not None:
            reason += f" (=#{r.reused_from})"
        reason += over_budget_note(r)
        row.update({
            # THE tokens/s of the trial (TOKENS_PER_S_LABEL): what the report and export say.
            "tokens/s": r.standing,
            **({CONFIRMED_COLUMN: r.confirmed_tokens_per_s,
                CONFIRMED_GAIN_COLUMN: confirmed_gain(r)} if any_confirmed else {}),
            "runs": r.n_runs if r.tokens_per_s is not None else None,
            **({PROPOSALS_COLUMN: 1 + copies[r.number]} if copies else {}),
            # Filled by autotune.study.selection.annotate; "~" marks a gain within noise.
            GAIN_COLUMN: ("baseline" if r.role == BASELINE_ROLE and r.reused_from is None
                          else r.vs_baseline.short() if r.vs_baseline is not None
                          else math.nan),
            "MFU %": math.nan if r.mfu is None else 100 * r.mfu,
            "peak GiB": r.peak_memory_gib, "step s": r.step_time_s, "compile s": r.compile_s,
            "state": r.state, "reason": reason,
            **({FLAGS_COLUMN: ", ".join(r.flags) or None} if any_flagged else {}),
        })
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    # Whole numbers where measured, blank (NaN) elsewhere, not 1.00.
    df["runs"] = pd.Series([math.nan if pd.isna(v) else int(v) for v in df["runs"]],
                           dtype=object, index=df.index)
    df["_ok"] = df["tokens/s"].notna()
    df = df.sort_values(["_ok", "_slower", "tokens/s", "trial"],
                        ascending=[False, True, False, True])
    df = df.drop(columns=["_ok", "_slower"]).reset_index(drop=True)
    return df.rename(columns=throughput_columns(unit_of(records)))


def over_budget_note(record: TrialRecord) -> str:
    """" (over budget: peak P > B GiB)" for a completed trial whose peak passed its memory
    budget, else "". The selection's rule (``headroom_gib`` below 0: never the pick) and the
    study's (``memory_over_budget_gib`` = peak - budget above 0), so that the table does not
    call ok what the study records as infeasible."""
    room = headroom_gib(record, None)
    if not record.ok or room is None or room >= 0:
        return ""
    return (f" (over budget: peak {record.peak_memory_gib:.2f} > "
            f"{budget_of(record, None):g} GiB)")


def throughput_columns(unit: str | None) -> dict[str, str]:
    """The throughput columns' headers in the workload's unit (tokens/s; samples/s for a
    workload that counts samples)."""
    return {"tokens/s": rate(unit), CONFIRMED_COLUMN: f"confirmed {rate(unit, short=True)}"}


def confirm_test(record: TrialRecord) -> tuple[Gain, int] | None:
    """confirm's paired within-round gain of a finalist against the baseline and its
    number of rounds; None for a trial confirm did not test."""
    test = record.confirmed.vs_baseline if record.confirmed is not None else None
    if test is None:
        return None
    return Gain(test.ratio, test.low, test.high, method="paired"), test.rounds


def confirmed_gain(record: TrialRecord) -> str | float:
    """:func:`confirm_test` as a table cell; NaN (shown blank) for a trial it did not test."""
    test = confirm_test(record)
    return test[0].short() if test else math.nan


def render(records: list[TrialRecord], *, limit: int = 20, noise_note: str = "") -> str:
    df = frame(records)
    if df.empty:
        return "(no trials)"
    shown = df.head(limit)
    text = text_table(shown)
    if len(df) > limit:
        text += f"\n... {len(df) - limit} more ({autotune_command('report')})"
    unit = unit_of(records)
    text += (f"\n{throughput_label(unit)}; runs = runs of the configuration the gains rest on; "
             "MFU %, peak GiB, step s, compile s = its own first run"
             + ("; rows separably slower than the baseline (their gain's whole interval below "
                "0) come after the others" if any(known_slower(r) for r in records) else ""))
    confirmed = throughput_columns(unit)[CONFIRMED_COLUMN]
    if confirmed in df.columns:
        text += (f"; {confirmed} = {CONFIRMED_LABEL}; {CONFIRMED_GAIN_COLUMN} = "
                 f"{CONFIRMED_GAIN_LABEL}; {GAIN_COLUMN} = the sweep's own runs")
    if PROPOSALS_COLUMN in df.columns:
        text += (f"; {PROPOSALS_COLUMN} = times the sampler proposed the configuration "
                 "(repeats reuse the result, launch nothing)")
    if FLAGS_COLUMN in df.columns:
        text += f"\n{FLAGS_NOTE}"
    if noise_note:
        text += f"\n{noise_note}"
    rebracketed = rebracketed_note(records)
    if rebracketed:
        text += f"\n{rebracketed}"
    return text


def rebracketed_note(records: list[TrialRecord]) -> str:
    """Why a trial's gain here can differ from the one its progress line printed: once the
    baseline was re-measured, each gain rests on the baseline's runs just before and after
    the trial, and a trial's line had only the one before (selection.nearest_baseline_runs).
    Empty when the baseline ran once."""
    base = baseline(records)
    runs = len(base.timed_runs()) if base is not None and base.ok else 0
    if runs < 2:
        return ""
    return (f"{GAIN_COLUMN}: each trial against the baseline's runs just before and after it "
            "that met the same load (quiet with quiet, loaded with loaded; the nearest in time "
            f"else) (the baseline ran {runs} times, sweep.baseline_every); the line printed "
            "when a trial ended had only the run before it, so its figure may have moved since")


#: What the flags column means, under the table.
FLAGS_NOTE = ("flags: load N = measured while other processes used N cores (above "
              "sweep.contention_cores); imprecise = the baseline's interval missed "
              "run.target_interval (every gain rests on it)")


def noise_line(level) -> str:
    """What the gain column rests on (a :class:`~autotune.study.noise.Noise`)."""
    loaded = level.loaded
    return (f"gains: 95 % intervals, bootstrap over measured steps + run-to-run noise "
            f"{100 * level.cv:.1f} % ({level.source})"
            + (f"; {100 * loaded.cv:.1f} % where the runs compared were {loaded.source}"
               if loaded is not None else "")
            + f"; ~ = within noise ({autotune_command('confirm')} re-measures the finalists "
            "against the baseline)")


def _numbered_repeats(record: TrialRecord):
    """(source, its run number within that source from 1, conditions) of each repeat: the
    third confirm run is "confirm run 3", however many re-measurements came before it."""
    seen: Counter = Counter()
    for rep in record.repeat_records:
        source = rep.source or "repeat"
        seen[source] += 1
        yield source, seen[source], rep.conditions


def flagged_lines(records: list[TrialRecord]) -> list[str]:
    """Which trials (and repeats) were measured under load, and whether the baseline missed
    its precision target: a line each, none when nothing is flagged."""
    loaded = [f"#{r.number} ({r.conditions.other_cores:.1f} cores)"
              for r in records if r.contended and r.reused_from is None]
    repeats = [f"#{r.number} {source} run {i} ({c.other_cores:.1f} cores)"
               for r in records for source, i, c in _numbered_repeats(r)
               if c is not None and c.contended]
    threshold = next((c.contention_cores for r in records
                      for c in [r.conditions, *r.repeat_conditions]
                      if c is not None and c.contended), None)
    out = []
    if loaded or repeats:
        out.append(f"measured under load (other processes above {threshold:g} cores): "
                   + ", ".join(loaded + repeats) + "; their figures are less certain than "
                   "their intervals say")
    out += [f"baseline #{r.number} missed its precision target: {r.imprecise}"
            for r in records if r.imprecise and r.reused_from is None]
    return out
