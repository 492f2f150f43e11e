"""Why a trial ended, as its optuna-dashboard note (Markdown): the outcome, its state, the
one-line detail and what the run measured. Written wherever a trial's end is recorded
(autotune/study/scoring.py, a re-queue in autotune/study/reaping.py); a note that cannot
be saved is a warning line, never raised.
"""

from __future__ import annotations

import logging

import optuna
from optuna_dashboard import save_note

from autotune.study.schema.scorecard import Scorecard
from trials.contract.outcomes import Outcome

log = logging.getLogger(__name__)


def outcome_note(outcome: Outcome, detail: str, *, scorecard: dict | None = None,
                 launched: bool = True) -> str:
    """The note's body: a heading with the reason, the detail, the measured figures."""
    lines = [f"## {outcome.value}: {outcome.label}", "",
             f"Optuna state: **{outcome.state}**" + ("" if launched else " (not launched)")]
    if detail:
        lines += ["", detail]
    figures = measured(scorecard or {})
    if figures:
        lines += ["", "| measured | value |", "|---|---|",
                  *(f"| {name} | {value} |" for name, value in figures)]
    return "\n".join(lines) + "\n"


def measured(scorecard: dict) -> list[tuple[str, str]]:
    """The headline figures of a scorecard that were measured, as (name, text)."""
    card = Scorecard.from_json(scorecard)
    perf, peak = card.performance, card.resources.peak_rss_gib_max_rank
    figures = [("tokens/s", perf.tokens_per_s, "{:,.0f}"), ("MFU", perf.mfu, "{:.2%}"),
               ("step time (mean)", perf.step_time_s, "{:.4f} s"),
               ("compile", perf.compile_s, "{:.1f} s"),
               ("measured steps", perf.measured_steps, "{:d}"),
               ("peak memory (max rank)", peak, "{:.2f} GiB")]
    return [(name, fmt.format(value)) for name, value, fmt in figures if value is not None]


def save(trial: optuna.Trial, body: str) -> None:
    """Store ``body`` as the trial's note (a newer version of an earlier one)."""
    try:
        save_note(trial, body)
    except Exception as exc:  # noqa: BLE001 - failures are data: a warning line
        log.warning("trial %d: could not save its dashboard note (%s: %s)", trial.number,
                    type(exc).__name__, exc)
