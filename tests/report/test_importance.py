"""Knob importance that counts stopped trials (autotune/report/importance.py), in the plot
(autotune/report/plots.py) and the diagnosis (autotune/report/diagnosis.py)."""

from __future__ import annotations

from autotune.report import importance, plots
from tests.report.test_report import assert_png, by_rule, rec

BASE = {"runtime.mode": "graph", "precision": "fp32", "train.recompute": "none"}


def partial(tps: float) -> dict:
    """The scorecard a slow trial keeps: what it had measured when it was stopped."""
    return {"performance": {"tokens_per_s": tps, "measured_steps": 2}}


def study_where_stopped_values_matter() -> list:
    """Every PyNative and fp16 trial stopped as slow (PyNative with its partial tokens/s,
    fp16 before it measured any), every full-recompute trial out of memory: the completed
    trials all ran graph, fp32, no recompute."""
    return [
        rec(0, tokens_per_s=2000.0, params=BASE | {"train.micro_batches": 1}, role="baseline"),
        rec(1, tokens_per_s=1500.0, params=BASE | {"train.micro_batches": 2}),
        rec(2, tokens_per_s=1000.0, params=BASE | {"train.micro_batches": 4}),
        rec(3, "slow", params=BASE | {"runtime.mode": "pynative", "train.micro_batches": 1},
            card=partial(300.0)),
        rec(4, "slow", params=BASE | {"runtime.mode": "pynative", "train.micro_batches": 2},
            card=partial(250.0)),
        rec(5, "slow", params=BASE | {"precision": "fp16", "train.micro_batches": 1}),
        rec(6, "slow", params=BASE | {"precision": "fp16", "train.micro_batches": 2}),
        rec(7, "oom", params=BASE | {"train.recompute": "full", "train.micro_batches": 1}),
        rec(8, "oom", params=BASE | {"train.recompute": "full", "train.micro_batches": 2}),
    ]


def test_a_knob_whose_values_were_all_stopped_shows_a_non_zero_effect():
    records = study_where_stopped_values_matter()
    spans = plots.knob_importance(records)
    effects = {e.knob: e for e in importance.effects(records)}
    # Rule: slow trials enter the tokens/s model at the tokens/s they had when stopped, so
    # PyNative, whose every trial was stopped, spans a range (completed trials alone: 0).
    assert spans["runtime.mode"] > 1000.0
    # Rule: a value stopped before it measured anything still counts: all fp16 trials and
    # all full-recompute ones were stopped, the knob's stopped share is above zero, and its
    # most-stopped value is the one with every trial stopped.
    for knob, value, how in (("precision", "fp16", "slow"), ("train.recompute", "full", "oom")):
        assert spans[knob] == 0.0
        assert effects[knob].stopped_share > 0.4
        worst = effects[knob].most_stopped
        assert (worst.value, worst.trials, worst.stopped) == (value, 2, 2)
        assert worst.text() == f"{value}: 2 of 2 stopped (2 {how})"
    # Rule: the knobs whose values got stopped lead a knob that explains nothing of it.
    order = [e.knob for e in importance.effects(records)]
    assert order.index("train.micro_batches") > max(order.index(k) for k in (
        "runtime.mode", "precision", "train.recompute"))


def test_the_importance_figure_is_drawn_from_stopped_trials_too(tmp_path):
    path = tmp_path / "importance.png"
    records = study_where_stopped_values_matter()
    # Rule: a study with stopped trials draws the figure (both panels), a valid PNG.
    assert plots.importance(records, path) is True
    assert_png(path)
    # Rule: one completed trial and one stopped one are two trials: enough to draw.
    assert plots.importance(records[:1] + records[3:4], path) is True
    # Rule: a single trial is still a note.
    assert plots.importance(records[:1], path) is False


def test_the_slow_rule_blames_each_value_its_contrast_isolates():
    (finding,) = by_rule(study_where_stopped_values_matter(), "slow")
    # Rule: no value is shared by all slow trials, but each value whose one-knob change
    # turned a completed trial into a slow one is named with that contrast: a gain where
    # both measured tokens/s, the stop itself where the slow one measured none.
    for cited in ("4 trials",
                  "runtime.mode=pynative did it: #3 against #0, which differs only in "
                  "runtime.mode=graph: -85.0 %",
                  "precision=fp16 did it: #5 was stopped as slow where #0, which differs only "
                  "in precision=fp32, completed"):
        assert cited in finding.sentence, (cited, finding.sentence)
    assert finding.numbers["causes"] == 2
    # train.micro_batches=2 completed alone (#1): slower among stopped trials, not a cause.
    assert "train.micro_batches=2 did it" not in finding.sentence


def test_the_oom_rule_blames_the_value_its_contrast_isolates():
    (finding,) = by_rule(study_where_stopped_values_matter(), "oom")
    # Rule: a value whose one-knob change turned a trial that fitted into one that ran out
    # of memory is named with that contrast; one that completed alone is not a cause.
    assert ("train.recompute=full did it: #7 ran out of memory where #0, which differs only "
            "in train.recompute=none, completed") in finding.sentence
    assert finding.numbers["causes"] == 1
    assert "train.micro_batches=2 did it" not in finding.sentence
