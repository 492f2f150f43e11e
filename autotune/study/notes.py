"""Why a trial ended, as its optuna-dashboard note (Markdown): the outcome, its state, the
one-line detail and what the run measured. Written wherever a trial's end is recorded
(autotune/study/scoring.py, a re-queue in autotune/study/reaping.py); a note that cannot
be saved is a warning line, never raised.
"""

from __future__ import annotations

import logging

import optuna
from optuna_dashboard import save_note

from autotune.presentation.invocation import autotune_command
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


def pick_note(sentence: str) -> str:
    """The study's note: autotune's pick (story.pick_sentence), beside why Optuna's own
    "Best Trial" badge may mark another trial."""
    return ("## autotune's pick\n\n" + sentence + "\n\nOptuna's *Best Trial* badge marks "
            "the trial whose own value (its first run) is highest; the pick weighs every "
            "run of each configuration against the noise, so the two can differ "
            f"(`{autotune_command('report')}` says why the pick is the pick).\n")


def save(target: optuna.Trial | optuna.Study, body: str) -> None:
    """Store ``body`` as the trial's or the study's note (a newer version of an earlier
    one)."""
    try:
        save_note(target, body)
    except Exception as exc:  # noqa: BLE001 - failures are data: a warning line
        number = getattr(target, "number", None)  # a study has none
        which = "the study" if number is None else f"trial {number}"
        log.warning("%s: could not save its dashboard note (%s: %s)", which,
                    type(exc).__name__, exc)
