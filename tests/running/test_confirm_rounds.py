"""confirm's rounds (autotune/running/confirm.py ``measure_rounds``), called directly on a
study swept in virtual time: every finalist once a round in the planned order, stored as
it finishes, and a second call with the same plan runs nothing again. The verb's output and
a stop by signal are tested through the command in tests/study/test_confirm.py."""

from __future__ import annotations

import io

from rich.console import Console

from autotune.running.confirm import measure_rounds
from autotune.settings import SweepConfig, validate_settings
from autotune.study import selection
from autotune.study.confirmation import confirm_finalists, round_orders
from autotune.study.layout import StudyLayout
from autotune.study.records import load_records
from trials.contract.compose import compose


def test_each_round_runs_every_finalist_in_its_order_and_a_resume_runs_none_again(harness):
    space = harness.space("rounds", {"runtime.threads": [2, 4], "train.micro_batches": [1, 2]})
    harness.script(steps=4, step_sleep=0.01)
    code, _, err = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true")
    assert code == 0, err
    composed = compose("sweep", harness.overrides(space), with_choices=True,
                       schema=SweepConfig)
    settings = validate_settings(composed).sweep
    study = harness.study()
    records = load_records(study, layout=StudyLayout.of(settings))
    base = selection.baseline(records)
    chosen = confirm_finalists(records, base, top_k=2)
    assert len(chosen) >= 2 and chosen[0] is base
    orders = round_orders(chosen, 2, seed=0)
    out = io.StringIO()
    runs, _ = measure_rounds(study, chosen, orders, base, settings, Console(file=out))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("confirm ")]
    planned = [r.number for order in orders for r in order]
    # Rule: every finalist runs once a round, in the round's planned (shuffled) order.
    assert [int(line.split("trial ")[1].split()[0]) for line in lines] == planned
    assert {n: len(kept) for n, kept in runs.items()} == {r.number: 2 for r in chosen}
    assert all(run is not None and run.performance.tokens_per_s > 0
               for kept in runs.values() for run in kept)
    # Rule: the runs are stored as they finish: the same plan again runs none of them and
    # returns the same stored runs.
    again = io.StringIO()
    runs_again, _ = measure_rounds(study, chosen, orders, base, settings, Console(file=again))
    assert "confirm 1/" not in again.getvalue()
    total = len(planned)
    assert f"resuming the stopped confirm: {total} of {total} runs" in again.getvalue()
    assert runs_again == runs
