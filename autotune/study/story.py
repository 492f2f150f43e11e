"""The one sentence that says which trial export takes, why, and the figure it rests on.

Written here once from the study's :class:`~autotune.study.selection.Verdict`; the sweep's
summary, ``confirm``'s closing line, ``report`` (its terminal lines, index.md and the
diagnosis) and ``export`` (its printed lines, README.md and provenance.json) all print it::

    pick (what export and soak take): trial #2 (thr=4): median 3,880 tokens/s over 2
    confirm re-runs; vs the baseline (trial #0) in confirm's paired rounds: +100.0 % (...);
    not trial #1, which measured median 4,000 tokens/s over 2 confirm re-runs but changes 2
    knob(s) where #2 changes 1 and is not separable from it: +3.1 %: within noise (...)

A faster-looking trial is named only beside the reason it was not picked, and no trial
but the pick is called anything like "best".
"""

from __future__ import annotations

from autotune.presentation.invocation import autotune_command
from autotune.presentation.labels import params_label
from autotune.study.noise import percent
from autotune.study.records import TrialRecord
from autotune.study.selection import Verdict, baseline, changes_from, headroom_gib, paired_with

#: How the sentence starts, wherever it is printed (and what tools grep for).
PREFIX = "pick (what export and soak take)"


def figure(record: TrialRecord) -> str:
    """The figure a trial is judged by: the median of confirm's re-runs where confirm
    re-measured it, else its standing in the sweep (the leaderboard's); labelled either
    way."""
    if record.confirmed_tokens_per_s:
        runs = len(record.confirmed.tokens_per_s)
        return (f"median {record.confirmed_tokens_per_s:,.0f} {record.rate} over {runs} "
                "confirm re-runs")
    return record.sweep_figure


def pick_sentence(verdict: Verdict, records: list[TrialRecord]) -> str:
    """What export will take and why, with the one figure that supports it (confirm's
    paired gain over the baseline where confirm ran, else the sweep's gain with its
    interval), and each faster-looking trial with the reason it was not picked."""
    pick = verdict.pick
    if pick is None:
        return f"{PREFIX}: none, {verdict.why}"
    base = baseline(records)
    head = f"{PREFIX}: trial #{pick.number} ({_knobs(pick, base)}): {figure(pick)}"
    versus = _versus_baseline(verdict, base)
    head += f"; {versus}" if versus else ""
    return "; ".join([head] + [f"not trial #{r.number}, which {why}"
                               for r, why in _passed_over(verdict, base)])


def requested_sentence(record: TrialRecord) -> str:
    """What export says of a trial named by ``export.trial`` instead of the pick."""
    return f"trial #{record.number}, as requested (export.trial): {figure(record)}"


def _versus_baseline(verdict: Verdict, base: TrialRecord | None) -> str:
    """The pick's gain over the baseline as the verdict measured it; a bare ratio of the
    sweep's figures where no interval could be had (runs without step times)."""
    pick = verdict.pick
    if base is None or base.number == pick.number:
        return ""
    if verdict.pick_vs_baseline:
        where = "in confirm's paired rounds" if paired_with(pick, base) else "in the sweep"
        return f"vs the baseline (trial #{base.number}) {where}: {verdict.pick_vs_baseline}"
    if not (pick.standing and base.standing):
        return ""
    return (f"vs the baseline (trial #{base.number}, {base.standing:,.0f} {base.rate} in "
            f"the sweep): {percent(pick.standing / base.standing - 1, 1)} %, no "
            "interval (no step times to bootstrap)")


def _knobs(record: TrialRecord, base: TrialRecord | None) -> str:
    """'the baseline', or the knobs it changes from it."""
    if base is not None and record.number == base.number:
        return "the baseline"
    changed = {k: v for k, v in record.params.items()
               if base is None or base.params.get(k) != v}
    return params_label(changed) or "no knobs"


def _passed_over(verdict: Verdict, base: TrialRecord | None
                 ) -> list[tuple[TrialRecord, str]]:
    """The faster-looking trials that are not the pick, each with why."""
    pick, top = verdict.pick, verdict.top
    out: list[tuple[TrialRecord, str]] = []
    if top is not None and top.number != pick.number:
        if base is not None and pick.number == base.number:
            why = f"is not separably faster than the baseline: {verdict.top_vs_pick}"
        else:
            why = (f"changes {changes_from(top, base)} knob(s) where #{pick.number} changes "
                   f"{changes_from(pick, base)} and is not separable from it: "
                   f"{verdict.top_vs_pick}")
        out.append((top, f"measured {figure(top)} but {why} (export.trial={top.number} "
                         "exports it anyway)"))
    named = {pick.number} | {r.number for r, _ in out}
    for other in (verdict.best_measured, verdict.confirmed_best):
        if other is not None and other.number not in named:
            named.add(other.number)
            out.append((other, _set_aside(other, verdict, base)))
    return out


def _set_aside(other: TrialRecord, verdict: Verdict, base: TrialRecord | None) -> str:
    """Why the fastest in the sweep, or the best confirmed, was not where the pick started."""
    room = headroom_gib(other, verdict.budget_gib)
    if verdict.min_headroom_gib > 0 and (room is None or room < verdict.min_headroom_gib):
        left = "an unknown" if room is None else f"{room:.2f} GiB of"
        return (f"measured {figure(other)} but leaves {left} memory headroom, under "
                f"export.min_headroom_gib={verdict.min_headroom_gib:g}")
    top = verdict.top
    sweep = other.sweep_figure
    if other is verdict.confirmed_best and other is not verdict.best_measured:
        return (f"has the highest confirmed median ({figure(other)}) but "
                "export.use_confirmed=false ranks trials by the sweep's figure")
    if top is not None and top.confirmed_tokens_per_s and other.confirmed_tokens_per_s:
        paired = (f" (vs the baseline in confirm's paired rounds: "
                  f"{other.confirmed.vs_baseline.text})"
                  if base is not None and paired_with(other, base) else "")
        return (f"measured {sweep} but confirm's re-runs put it at a median of "
                f"{other.confirmed_tokens_per_s:,.0f} {other.rate}{paired}, below "
                f"#{top.number}'s {top.confirmed_tokens_per_s:,.0f}")
    if top is not None and top.confirmed_tokens_per_s:
        return (f"measured {sweep} but was not re-measured by confirm, whose median "
                f"ranks #{top.number} first ({autotune_command('confirm')} again re-measures "
                "it with the others)")
    if top is not None and (other.standing or 0) > (top.standing or 0):
        return (f"measured {sweep} but #{top.number} is separably faster than it on the runs "
                "of the two measured alike (the final race's comparison)")
    return f"measured {sweep} but ranks below #{top.number if top else '?'}"
