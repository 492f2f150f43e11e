"""How a sweep ends is a kind the loop acts on (autotune/study/sweep_end.py), not a prefix
of the sentence it prints."""

from __future__ import annotations

from autotune.study.sweep_end import DONE, EndKind, SweepEnd


def test_only_a_stop_rule_fails_the_sweep():
    # Rule: exit code 1 for a stop rule; a spent budget, an exhausted space or an idle
    # sampler end the sweep without failing it.
    assert SweepEnd.stopped("stopped: x").exit_code == 1
    assert [SweepEnd(k, "m").exit_code for k in EndKind if k is not EndKind.STOPPED] == [0] * 3


def test_an_idle_sampler_halts_like_a_stop_rule_but_a_spent_budget_does_not():
    # Rule: proposals already in line still run when the budget is spent or the space is
    # exhausted (their launches are claimed); they are given back when the sweep halts.
    assert EndKind.IDLE.halts and EndKind.STOPPED.halts
    assert not EndKind.DONE.halts and not EndKind.EXHAUSTED.halts


def test_the_printed_line_is_the_message_word_for_word():
    assert str(SweepEnd(EndKind.EXHAUSTED, "search space exhausted: all 4")) == \
        "search space exhausted: all 4"
    assert DONE.message == "done" and DONE.kind is EndKind.DONE
