"""Stage 2 (memory: which points of the space fit, by the cost model's predicted peak) and
stage 4 (throughput: the sweep, unless its budget is spent), called directly on a checked
context (autotune/stages/memory.py, autotune/stages/throughput.py); ``tune`` runs them
in order in tests/stages/test_stages.py."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from autotune.settings import TuneSettings
from autotune.stages.memory import run_memory
from autotune.stages.throughput import run_throughput
from autotune.study.sweep_end import SweepOutcome


class PeakByMicroBatches:
    """A cost model whose predicted peak is a fixed fraction of the budget per micro-batch
    count: 1 -> 50 %, 2 -> 95 % (fits only without headroom), 4 -> 150 %."""

    constants = SimpleNamespace(source="a test's model")

    def __init__(self, budget_gib: float) -> None:
        self.budget = budget_gib

    def predict_config(self, cfg):
        share = {1: 0.5, 2: 0.95, 4: 1.5}[cfg.train.micro_batches]
        return SimpleNamespace(peak_gib=share * self.budget)


def test_memory_sorts_every_point_into_fits_tight_and_over_with_the_worst_named(harness):
    context = harness.context({"train.micro_batches": [1, 2, 4], "runtime.threads": [1, 2]})
    context = dataclasses.replace(context, model=PeakByMicroBatches(context.budget_gib))
    result = run_memory(context, TuneSettings(headroom=0.1))
    # Rule: a point fits when its peak leaves the headroom free, is tight when it fits
    # only without it, and is over beyond the budget; every point is counted once.
    assert (result.fit, result.tight, result.over, result.points) == (2, 2, 2, 6)
    assert {p["train.micro_batches"] for p in result.over_examples} == {4}
    assert result.model == "a test's model"
    # Rule: the headroom is the user's: none makes every tight point fit.
    none = run_memory(context, TuneSettings(headroom=0.0))
    assert (none.fit, none.tight, none.over) == (4, 0, 2)
    assert "largest predicted peak" in result.lines[1]


def test_memory_says_how_far_it_is_while_it_predicts_a_large_space(harness):
    context = harness.context({"train.micro_batches": [1, 2, 4], "runtime.threads": [1, 2]})
    context = dataclasses.replace(context, model=PeakByMicroBatches(context.budget_gib))
    ticks = iter(range(0, 1000, 10))  # each reading of the clock: 10 s later
    said = []
    run_memory(context, TuneSettings(), say=said.append, clock=lambda: next(ticks))
    # Rule: one line up front with the count, then one every PROGRESS_EVERY_S (15 s).
    assert said[0] == "predicting the peak memory of 6 points of the space"
    assert said[1:] == ["1 of 6 points predicted", "3 of 6 points predicted",
                        "5 of 6 points predicted"]


def test_memory_without_a_cost_model_leaves_memory_to_the_trials(harness):
    context = dataclasses.replace(harness.context({"runtime.threads": [1, 2]}), model=None)
    result = run_memory(context, TuneSettings())
    # Rule: a user workload has no dimensions: nothing is ruled out, the stage says why.
    assert result.done and not result.points and result.over == 0
    assert "trial by trial" in result.lines[0]


def test_throughput_is_the_sweep_and_its_outcome_the_stages():
    calls = []

    def sweep(code: int, message: str):
        def run() -> SweepOutcome:
            calls.append(code)
            return SweepOutcome(exit_code=code, message=message)
        return run

    # Rule: the stage always runs the sweep, its budget spent or not (run again, the sweep
    # launches nothing more, finishes a final race a stop cut short and prints the pick).
    done = run_throughput(sweep(0, "the budget is spent\nmore"))
    assert calls == [0] and done.done and done.lines == ["the budget is spent"]
    # Rule: its failure is the stage's, first line.
    failed = run_throughput(sweep(1, "stopped: a test's reason\nmore"))
    assert calls == [0, 1] and failed.failed and not failed.done
    assert failed.lines == ["stopped: a test's reason"]
