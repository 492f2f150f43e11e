"""autotune.study.notes: why a trial ended, as its dashboard note; never raised."""

from __future__ import annotations

import logging

from autotune.study.notes import measured, outcome_note, save
from trials.contract.outcomes import Outcome


def test_the_note_has_the_outcome_state_detail_and_only_measured_figures():
    card = {"performance": {"tokens_per_s": 12345.6, "mfu": 0.25, "measured_steps": 8},
            "resources": {"peak_rss_gib_max_rank": 1.5}}
    note = outcome_note(Outcome.OK, "fine", scorecard=card)
    # Rule: a heading with the reason, the Optuna state, the one-line detail.
    assert note.startswith("## ok: ") and "Optuna state: **COMPLETE**" in note
    assert "\nfine\n" in note
    # Rule: figures formatted for reading; what was not measured is left out.
    assert measured(card) == [("tokens/s", "12,346"), ("MFU", "25.00%"),
                              ("measured steps", "8"), ("peak memory (max rank)", "1.50 GiB")]
    # Rule: a trial never launched says so; no scorecard, no table.
    bare = outcome_note(Outcome.INFEASIBLE, "", launched=False)
    assert "(not launched)" in bare and "| measured |" not in bare


class Broken:
    number = 7
    study = None  # save_note cannot reach a storage through it


def test_a_note_that_cannot_be_saved_is_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="autotune.study.notes"):
        save(Broken(), "body")  # must not raise
    # Rule: the failure is one warning line naming the trial.
    assert "trial 7: could not save its dashboard note" in caplog.text


class BrokenStudy:
    _storage = None  # a study (no trial number) whose note cannot be stored


def test_a_study_note_that_cannot_be_saved_is_a_warning_naming_the_study(caplog):
    with caplog.at_level(logging.WARNING, logger="autotune.study.notes"):
        save(BrokenStudy(), "body")  # must not raise
    assert "the study: could not save its dashboard note" in caplog.text
