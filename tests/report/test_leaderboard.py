"""The leaderboard as a person reads it: blanks for what was not measured, fast steps in
significant digits, columns that stay aligned whatever a reason is called."""

from __future__ import annotations

from autotune.presentation.tables import significant
from autotune.report.leaderboard import render
from autotune.study.records import TrialRecord
from autotune.study.scoring import constraints_for
from trials.contract.outcomes import Constraint, Outcome


def record(number: int, tokens_per_s: float | None, reason: Outcome, *, step_s: float = 0.0123,
           mfu: float | None = None) -> TrialRecord:
    ran = tokens_per_s is not None
    return TrialRecord(
        number=number, state="COMPLETE" if ran else "PRUNED",
        params={"precision": "fp32", "train.micro_batches": 1}, reason=reason, detail="",
        launched=True, role="baseline" if number == 0 else "", tokens_per_s=tokens_per_s,
        mfu=mfu, peak_memory_gib=0.5 if ran else None, step_time_s=step_s if ran else None,
        compile_s=3.2 if ran else None, data_wait_share=None, micro_batch_size=8,
        started=None, wall_s=None, trial_dir=None, reused_from=None)


def board(records: list[TrialRecord]) -> list[str]:
    return render(records).splitlines()[:len(records) + 1]


def test_a_workload_without_flops_shows_no_mfu_as_a_blank_not_none():
    lines = board([record(0, 2841.0, Outcome.OK), record(1, 3000.0, Outcome.OK)])
    # Rule: a missing MFU is "-", never Python's None.
    assert not any("None" in line for line in lines), lines


def test_fast_steps_keep_their_significant_digits():
    lines = board([record(0, 2841.0, Outcome.OK, step_s=0.0042)])
    # Rule: a 4.2 ms step reads 0.00420, not 0.00 (two decimals).
    assert "0.00420" in lines[1], lines
    assert significant(0.0042) == "0.00420" and significant(12.345) == "12.3"
    assert significant(1234.5) == "1,234"
    # Rule: a column no format names shows four significant digits (plan.md printed
    # 32.8522 and 0.861328), whole numbers bare, never an exponent.
    from autotune.presentation.tables import number

    assert [number("bubble share", v) for v in (32.8522, 0.861328, 12345.6, 1.5e-05, 2.0)] == [
        "32.85", "0.8613", "12,346", "0.00001500", "2"]
    # Rule: the memory columns of one table read alike (plan's peak, states, activations).
    assert {number(c, 7.84512) for c in ("peak GiB", "states GiB", "activations GiB")} == {
        "7.845"}


def test_a_long_reason_keeps_every_column_aligned():
    lines = board([record(0, 2841.0, Outcome.OK), record(1, None, Outcome.PREDICTED_OOM),
                   record(2, None, Outcome.OOM)])
    header, *rows = lines
    # Rule: words start where their header starts, numbers end where theirs ends, on every
    # line, so a long word such as predicted_oom widens only its own column.
    for row, state, reason in zip(rows, ["COMPLETE", "PRUNED", "PRUNED"],
                                  ["ok", "predicted_oom", "oom"]):
        assert row.index(f"  {state} ") + 2 == header.index("state"), lines
        assert row.endswith(f"  {reason}") and len(row) - len(reason) == header.index(
            "reason"), lines
    step_end = header.index("step s") + len("step s")
    assert rows[0][step_end - len("0.0123"):step_end] == "0.0123", lines
    assert rows[1][step_end - 1] == "-", lines


def test_a_completed_trial_over_its_memory_budget_is_not_shown_as_plain_ok():
    over = record(1, 3000.0, Outcome.OK)
    over.peak_memory_gib = 9.029
    over.scorecard = {"resources": {"memory_budget_gib": 8.0}}
    within = record(0, 2841.0, Outcome.OK)
    within.scorecard = {"resources": {"memory_budget_gib": 8.0}}
    rows = board([within, over])[1:]
    # Rule: the leaderboard says over budget where the study's constraint (peak - budget > 0)
    # and the selection (negative headroom: never the pick) do; within budget stays "ok".
    assert rows[0].endswith("ok (over budget: peak 9.03 > 8 GiB)"), rows
    assert rows[1].endswith("  ok"), rows
    memory = Constraint.MEMORY.value
    assert constraints_for(Outcome.OK, 9.029, 8.0)[memory] > 0
    assert constraints_for(Outcome.OK, 0.5, 8.0)[memory] <= 0


def test_every_sentence_quotes_a_trial_by_the_leaderboards_figure():
    """A trial measured again (the baseline's re-measurement, racing) is ranked and shown by
    its runs pooled; the pick sentence and the exported README quote that same figure, not
    its first run (a new user read 1,888 in the sentence beside 2,023 on the board)."""
    from autotune.study import story
    from autotune.study.schema.repeats import Repeat
    from trials.contract.performance import Performance

    base = record(0, 1888.0, Outcome.OK)
    base.scorecard = {"performance": Performance.from_dict({"tokens_per_s": 1888.0}).to_dict()}
    again = Performance.from_dict({"tokens_per_s": 2168.0})
    base.repeats = [Repeat(performance=again, source="baseline-check").to_json()]
    pooled = (1888.0 * 2168.0) ** 0.5  # the geometric mean: 2,023
    assert round(base.standing) == round(pooled) == 2023
    assert "2,023" in board([base])[1]
    assert story.figure(base) == "2,023 tokens/s in the sweep (geometric mean of 2 runs)"


def test_the_noise_line_states_the_noise_of_gains_on_loaded_runs_too():
    from autotune.report.leaderboard import noise_line
    from autotune.study.noise import Noise

    quiet = Noise(0.05, "the hardware profile's cost.run_to_run_cv")
    assert "under load" not in noise_line(quiet)
    loaded = Noise(0.05, "prior", loaded=Noise(0.4, "measured under load: the baseline's "
                                                    "own spread over 4 runs", 3))
    # Rule: the footer names both noises the gain column rests on (it said 5.0 % beside
    # intervals of -99..+7917 %, built at the loaded run's 40 %).
    line = noise_line(loaded)
    assert "5.0 %" in line and "40.0 % where the runs compared were measured under load" in line


def test_a_trial_separably_slower_than_the_baseline_ranks_after_the_others():
    from autotune.study.confirmation import confirm_finalists
    from autotune.study.noise import Gain

    base = record(0, 1774.0, Outcome.OK)
    lucky = record(11, 2097.0, Outcome.OK)  # one quiet run beside a loaded baseline
    even = record(2, 1794.0, Outcome.OK)
    lucky.params, even.params = {"k": 11}, {"k": 2}
    lucky.vs_baseline = Gain(-0.25, -0.35, -0.14, "paired")
    even.vs_baseline = Gain(-0.01, -0.12, 0.13, "paired")
    lines = render([base, lucky, even]).splitlines()
    order = [int(line.split()[0]) for line in lines[1:4]]
    # Rule: by its runs pooled it reads fastest; separably slower than the baseline on the
    # runs measured alike, it comes after the rest (it topped the table at -25 %).
    assert order == [2, 0, 11], lines
    assert "rows separably slower than the baseline" in lines[4]
    # Rule: confirm re-measures it last, not first (it spent two of its three finalists on
    # trials already known to be slower).
    for r, where in ((base, "0"), (lucky, "11"), (even, "2")):
        r.trial_dir = where
    assert [r.number for r in confirm_finalists([base, lucky, even], base, 1)] == [0, 2]
