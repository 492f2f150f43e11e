"""confirm's verdicts as pure functions (autotune/study/confirmation.py): who is re-measured,
in which order, which rounds pair, and what the notes say. Running the rounds is tested
end to end in tests/study/test_confirm.py and tests/export/test_export_confirm.py."""

from __future__ import annotations

import pytest

from autotune.study.confirmation import (
    SPEED_CHANGE,
    confirm_finalists,
    paired_against_medians,
    round_orders,
    rounds_of,
    speed_change,
    speed_changed,
    spread,
    too_few_rounds,
    verdicts,
)
from autotune.study.records import TrialRecord
from tests.fakes import rec


def trial(number: int, tokens_per_s: float, **params) -> TrialRecord:
    return rec(number, tokens_per_s=tokens_per_s, params=params or {"n": number},
               trial_dir=f"/runs/{number}", role="baseline" if number == 0 else "sampled")


def test_the_baseline_comes_first_and_no_copy_of_it_takes_a_finalists_place():
    base = trial(0, 100.0, micro=1)
    twin = trial(1, 130.0, micro=1)  # the baseline's own configuration, measured again
    others = [trial(2, 120.0, micro=2), trial(3, 110.0, micro=4), trial(4, 90.0, micro=8)]
    chosen = confirm_finalists([base, twin, *others], base, top_k=2)
    # Rule: the baseline, then the top_k fastest *other* configurations (a re-run of the
    # baseline would re-measure it and leave a finalist out).
    assert [r.number for r in chosen] == [0, 2, 3]


def test_every_round_is_a_seeded_shuffle_of_the_finalists():
    chosen = [trial(n, 100.0 + n) for n in range(4)]
    orders = round_orders(chosen, 5, seed=3)
    # Rule: each round runs every finalist once, in an order the seed fixes.
    assert all(sorted(r.number for r in order) == [0, 1, 2, 3] for order in orders)
    assert [[r.number for r in o] for o in orders] == \
        [[r.number for r in o] for o in round_orders(chosen, 5, seed=3)]
    assert len({tuple(r.number for r in o) for o in orders}) > 1


def test_a_round_pairs_only_two_finished_runs_that_met_the_same_load():
    runs = {1: [110.0, None, 120.0, 115.0], 0: [100.0, 101.0, 99.0, 100.0]}
    loaded = {1: [False, False, True, False], 0: [False, False, False, False]}
    # Rule: a failed run drops its round; a round where one of the two ran under load
    # compares the load, not the configurations, and is left out.
    assert rounds_of(runs, 1, 0) == ([110.0, 120.0, 115.0], [100.0, 99.0, 100.0])
    assert rounds_of(runs, 1, 0, loaded) == ([110.0, 115.0], [100.0, 100.0])


def test_verdicts_test_each_finalist_against_the_baseline_within_rounds():
    base, fast = trial(0, 100.0), trial(1, 120.0)
    runs = {0: [100.0, 102.0, 98.0, 101.0], 1: [121.0, 122.0, 118.0, 121.5]}
    loaded = {0: [False] * 4, 1: [False] * 4}
    out = verdicts([base, fast], runs, base, loaded)
    # Rule: the baseline gets its spread only; a finalist its paired gain against it.
    assert out[0].vs_baseline is None and out[0].median == pytest.approx(100.5)
    test = out[1].vs_baseline
    assert out[1].baseline == 0 and test.rounds == 4 and test.real
    assert test.low < 0.2 < test.high
    # Rule: with the rounds under other loads left out, too few remain: no test at all.
    uneven = {0: [False, True, True, True], 1: [False] * 4}
    assert verdicts([base, fast], runs, base, uneven)[1].vs_baseline is None


def test_the_speed_change_note_appears_only_beyond_the_threshold_either_way():
    base = trial(0, 100.0)
    # Rule: a baseline confirmed beyond SPEED_CHANGE of its sweep figure, faster or slower,
    # means the machine's speed changed; within it, nothing is said.
    assert speed_changed(SPEED_CHANGE * 1.01) and speed_changed(1 / SPEED_CHANGE / 1.01)
    assert not speed_changed(1.0) and not speed_changed(None)
    assert "the machine's speed changed" in speed_change(base, spread([140.0, 140.0]))
    assert speed_change(base, spread([110.0, 112.0])) is None


def test_a_wide_test_on_two_rounds_says_how_many_rounds_would_do():
    base, other = trial(0, 100.0), trial(1, 100.0)
    runs = {0: [100.0, 100.0], 1: [120.0, 90.0]}
    summary = verdicts([base, other], runs, base, {0: [False] * 2, 1: [False] * 2})
    note = too_few_rounds(summary)
    # Rule: 2 rounds and a wide interval: the note names Student's t factor (12.7 at one
    # degree of freedom) and the rounds that make it usable.
    assert note is not None and "12.7 x" in note and "confirm.repeats=5" in note
    narrow = {0: [100.0, 100.0, 100.0], 1: [110.0, 110.5, 110.2]}
    assert too_few_rounds(verdicts([base, other], narrow, base,
                                   {0: [False] * 3, 1: [False] * 3})) is None


def test_a_finalist_with_no_paired_test_says_what_it_needs():
    base, other = trial(0, 100.0), trial(1, 100.0)
    one_round = verdicts([base, other], {0: [100.0], 1: [110.0]}, base,
                         {0: [False], 1: [False]})
    # Rule: confirm.repeats=1 leaves a finalist without a test ("too few rounds" in its
    # row); the note names it and the rounds that give one.
    assert one_round[1].vs_baseline is None and one_round[1].baseline == 0
    note = too_few_rounds(one_round)
    assert note.startswith("note: trial #1 has no paired test against the baseline")
    assert "confirm.repeats=5" in note and "rests on" not in note


def test_a_paired_gain_against_the_medians_says_which_to_read():
    base, other = trial(0, 100.0), trial(1, 100.0)
    loaded = {0: [False] * 3, 1: [False] * 3}
    # The machine ran fast in round 3: the finalist's median is the higher, yet in every
    # round it was the slower of the pair.
    drift = {0: [100.0, 101.0, 130.0], 1: [97.0, 103.0, 126.0]}
    note = paired_against_medians(verdicts([base, other], drift, base, loaded))
    # Rule: the note names the trial, both figures, and which to read.
    assert note is not None and note.startswith("note: trial #1 (+2.0 % by medians, ")
    assert "read the paired figure" in note
    steady = {0: [100.0, 101.0, 102.0], 1: [110.0, 111.0, 112.0]}
    assert paired_against_medians(verdicts([base, other], steady, base, loaded)) is None
