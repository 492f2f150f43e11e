"""``python -m autotune report``: diagnosis rules on built records; a report of a real study."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from autotune.report import plots, tables
from autotune.report.diagnosis import diagnose
from autotune.study.records import TrialRecord
from trials.contract.outcomes import Outcome

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REPORT_FILES = ("experiments.csv", "experiments.md", "ablation.md", "failures.md",
                "diagnosis.md", "history.png", "memory_vs_throughput.png", "importance.png",
                "knob_effects.png", "prediction.md", "prediction.png", "index.md")
CONFIG = {"precision": "fp32", "train.lr": 0.001, "train.clip_norm": 1.0,
          "data.num_workers": 1, "data.prefetch": 16, "sweep.stop.compile_timeout_s": 180.0,
          "sweep.stop.step_timeout_s": 60.0, "sweep.stop.wall_timeout_s": 900.0}


def rec(number: int, reason: str = "ok", *, params: dict | None = None,
        tokens_per_s: float | None = None, card: dict | None = None, **fields) -> TrialRecord:
    """A TrialRecord as load_records would build it; anything not given is unknown."""
    values = dict(number=number, state=Outcome(reason).state, params=params or {},
                  reason=Outcome(reason), detail="", launched=True, role="sampled",
                  tokens_per_s=tokens_per_s, mfu=None, peak_memory_gib=None, step_time_s=None,
                  compile_s=None, data_wait_share=None, micro_batch_size=None, started=None,
                  wall_s=None, trial_dir=None, reused_from=None, scorecard=card or {},
                  attrs={})
    values.update(fields)
    return TrialRecord(**values)


def by_rule(records: list[TrialRecord], rule: str, **kwargs) -> list:
    kwargs.setdefault("config", CONFIG)
    return [f for f in diagnose(records, **kwargs) if f.rule == rule]


def test_best_trial_cites_throughput_mfu_memory_and_change_over_baseline():
    records = [rec(0, tokens_per_s=1000.0, role="baseline"),
               rec(1, tokens_per_s=1500.0, mfu=0.25, peak_memory_gib=3.5),
               rec(2, tokens_per_s=9000.0, peak_memory_gib=9.5)]
    (finding,) = by_rule(records, "pick", budget_gib=8.0)
    # Rule: the best trial is the fastest one within the memory budget (#2 is over it).
    assert finding.trials == (1,)
    for cited in ("#1", "1,500 tokens/s", "25.0 % MFU", "3.50 GiB", "8.00 GiB", "+50.0 %",
                  "#0", "1,000 tokens/s"):
        assert cited in finding.sentence, (cited, finding.sentence)
    assert finding.numbers["change"] == pytest.approx(0.5)


def test_best_trial_when_nothing_completed():
    (finding,) = by_rule([rec(0, "crash"), rec(1, "oom")], "pick")
    # Rule: no completed trial is said plainly, and no trial is named best.
    assert finding.trials == ()
    assert "No trial finished" in finding.sentence and "2 trials" in finding.sentence


def test_data_wait_rule():
    records = [rec(0, tokens_per_s=900.0, data_wait_share=0.231),
               rec(1, tokens_per_s=500.0, data_wait_share=0.5)]
    (finding,) = by_rule(records, "data_bound", config=CONFIG | {"machine.cores": 2})
    # Rule: > 10 % data wait on the best trial -> more workers / prefetch, citing the share.
    assert finding.trials == (0,)
    for cited in ("23.1 %", "10.0 %", "data.num_workers=1 -> 2", "data.prefetch=16 -> 32"):
        assert cited in finding.sentence, (cited, finding.sentence)


def test_data_wait_rule_negative():
    # Rule: a low share on the best trial is fine, even when a slower trial waited a lot.
    records = [rec(0, tokens_per_s=900.0, data_wait_share=0.05),
               rec(1, tokens_per_s=500.0, data_wait_share=0.5)]
    assert by_rule(records, "data_bound") == []


def _probe(pipeline: float, compute: float, train: float) -> dict:
    return {"performance": {"pipeline_samples_per_s": pipeline,
                            "compute_samples_per_s": compute, "samples_per_s": train}}


def test_data_bound_baseline_opens_the_diagnosis_and_names_its_fix():
    base = rec(0, tokens_per_s=100.0, role="baseline", data_wait_share=0.55,
               card=_probe(110.0, 260.0, 100.0))
    fixed = rec(1, tokens_per_s=175.0, data_wait_share=0.02, params={"data.num_workers": 2},
                card=_probe(320.0, 260.0, 175.0))
    findings = diagnose([base, fixed], config=CONFIG | {"machine.cores": 2})
    # Rule: a data-bound baseline is the first finding, with its wait share and its probe.
    assert findings[0].rule == "data_bound" and findings[0].trials == (0,)
    for cited in ("baseline (trial #0) is data-bound", "55.0 %", "110 samples/s", "260",
                  "Trial #1 fixed it with data.num_workers=2", "+75.0 %"):
        assert cited in findings[0].sentence, (cited, findings[0].sentence)
    assert findings[0].numbers["fix_change"] == pytest.approx(0.75)


def test_data_bound_by_the_probe_alone():
    # The pipeline competes with the step for the cores: little data wait, yet the step
    # trains at half its compute-alone rate.
    base = rec(0, tokens_per_s=138.0, role="baseline", data_wait_share=0.03,
               card=_probe(320.0, 284.0, 138.0))
    (finding,) = by_rule([base], "data_bound", config=CONFIG | {"machine.cores": 2})
    # Rule: the probe's compute-alone rate exposes a data-bound step that data wait misses.
    for cited in ("138 samples/s", "0.49 x", "284", "competes with the step for the cores"):
        assert cited in finding.sentence, (cited, finding.sentence)


def test_the_pipeline_cost_is_said_with_its_number_or_as_nothing_measurable():
    knobs = {"data.num_workers": 1, "data.prefetch": 3}
    # An image pipeline on time (0.3 ms wait) that still slows the step: 0.80 x alone.
    shared = rec(0, tokens_per_s=80.0, role="baseline", data_wait_share=0.003, params=knobs,
                 card=_probe(900.0, 100.0, 80.0))
    (finding,) = by_rule([shared], "pipeline", config=CONFIG | {"machine.cores": 2})
    # Rule: the probe's gap is the pipeline's cost, named with its number and its knobs.
    for cited in ("costs 20.0 % of the step", "80.0 samples/s, 0.80 x its step alone (100.0",
                  "data.num_workers=1 -> 2", "data.prefetch=3 -> 6"):
        assert cited in finding.sentence, (cited, finding.sentence)
    assert finding.numbers["pipeline_cost_share"] == pytest.approx(0.2)
    # Rule: the built-in GPT trains as fast as its step alone: nothing measurable.
    gpt = rec(0, tokens_per_s=560.0, role="baseline", data_wait_share=0.0,
              card=_probe(8990.0, 16.0, 17.5))
    (finding,) = by_rule([gpt], "pipeline")
    assert finding.sentence.startswith("The input pipeline costs nothing measurable")
    # Rule: a data-bound run is the data_bound rule's to open with, not said twice.
    bound = rec(0, tokens_per_s=50.0, role="baseline", data_wait_share=0.003,
                card=_probe(900.0, 100.0, 50.0))
    assert by_rule([bound], "pipeline") == [] and by_rule([bound], "data_bound")


def test_data_advice_never_exceeds_the_cores():
    base = rec(0, tokens_per_s=100.0, role="baseline", data_wait_share=0.4,
               params={"data.num_workers": 2})
    (finding,) = by_rule([base], "data_bound", config=CONFIG | {"machine.cores": 2})
    # Rule: at the core count already, no more workers are proposed (MindSpore refuses them).
    assert "data.num_workers=2 ->" not in finding.sentence
    assert "data.prefetch=16 -> 32" in finding.sentence


def test_data_advice_quotes_a_change_already_made_alone_instead_of_advising_it():
    knobs = {"data.num_workers": 1, "data.prefetch": 16}
    base = rec(0, tokens_per_s=100.0, role="baseline", data_wait_share=0.55, params=knobs)
    more = rec(1, tokens_per_s=98.0, data_wait_share=0.5,
               params=knobs | {"data.num_workers": 2})
    (finding,) = by_rule([base, more], "data_bound", config=CONFIG | {"machine.cores": 2})
    # Rule: a data change the study made alone is its contrast, not advice to make it.
    assert "more dataset workers" not in finding.sentence
    assert ("data.num_workers=2 was tried: #1 against #0, which differs only in "
            "data.num_workers=1: -2.0 %") in finding.sentence, finding.sentence
    # Rule: what was not tried is still advised, and the advice fits any workload's kind.
    assert "data.prefetch=16 -> 32" in finding.sentence
    assert "vision" not in finding.sentence


def test_low_mfu_rule():
    best = rec(0, tokens_per_s=900.0, mfu=0.036, micro_batch_size=2,
               params={"train.micro_batches": 4})
    (finding,) = by_rule([best], "low_mfu")
    # Rule: MFU < 10 % with a micro-batch <= 2 -> a larger micro-batch (fewer accumulation steps).
    for cited in ("3.6 %", "10.0 %", "2 samples", "train.micro_batches=4 -> 2"):
        assert cited in finding.sentence, (cited, finding.sentence)


@pytest.mark.parametrize("mfu, micro_batch_size", [(0.036, 8), (0.25, 1), (None, 1)])
def test_low_mfu_rule_negative(mfu, micro_batch_size):
    # Rule: a large micro-batch, a healthy MFU or an unknown MFU gives no low-MFU advice.
    best = rec(0, tokens_per_s=900.0, mfu=mfu, micro_batch_size=micro_batch_size)
    assert by_rule([best], "low_mfu") == []


def test_diverged_fp16_rule():
    card = {"correctness": {"nonfinite_steps": 3}, "stability": {"overflow_steps": 12}}
    records = [rec(0, tokens_per_s=900.0),
               rec(4, "diverged", params={"precision": "fp16"}, card=card),
               rec(6, "diverged", card=card)]  # fp16 from the config, not its params
    (finding,) = by_rule(records, "diverged_fp16", config=CONFIG | {"precision": "fp16"})
    # Rule: NaN/diverged in fp16 -> loss scaling or bf16, citing the counts behind it.
    assert finding.trials == (4, 6)
    for cited in ("2 trials", "#4, #6", "6 non-finite", "24 overflow", "loss_scale=dynamic",
                  "bf16"):
        assert cited in finding.sentence, (cited, finding.sentence)
    assert by_rule(records, "diverged", config=CONFIG | {"precision": "fp16"}) == []


def test_diverged_rule():
    card = {"correctness": {"grad_norm_max": 1234.5}, "stability": {"loss_spikes": 2}}
    records = [rec(3, "diverged", params={"precision": "fp32"}, card=card)]
    (finding,) = by_rule(records, "diverged")
    # Rule: divergence without fp16 -> a lower learning rate or harder clipping.
    for cited in ("#3", "fp32", "2 loss spikes", "1.23e+03", "train.lr=0.001 -> 0.0005",
                  "train.clip_norm=1 -> 0.5"):
        assert cited in finding.sentence, (cited, finding.sentence)
    # Rule: an fp32 divergence is not blamed on fp16.
    assert by_rule(records, "diverged_fp16") == []


def test_oom_rule():
    records = [rec(2, "oom", params={"train.micro_batches": 1, "train.recompute": "none"},
                   peak_memory_gib=9.5, micro_batch_size=8),
               rec(5, "oom", params={"train.micro_batches": 2, "train.recompute": "none"},
                   micro_batch_size=4)]
    (finding,) = by_rule(records, "oom", budget_gib=8.0)
    # Rule: OOM -> smaller micro-batch via accumulation, or recompute; cites peak and budget.
    for cited in ("2 trials", "#2, #5", "9.50 GiB", "8.00 GiB", "4/8 samples",
                  "train.micro_batches=2 -> 4", "train.recompute=full"):
        assert cited in finding.sentence, (cited, finding.sentence)


def test_oom_rule_negative():
    # Rule: no OOM, no OOM advice; with recompute already on, it is not suggested again.
    assert by_rule([rec(0, tokens_per_s=1.0)], "oom") == []
    (finding,) = by_rule([rec(1, "oom", params={"train.recompute": "full"})], "oom")
    assert "train.recompute=full" not in finding.sentence
    assert "recompute was already on" in finding.sentence


def test_hang_rule():
    records = [rec(1, "hang", wall_s=180.4),
               rec(2, "hang", wall_s=75.0, card={"performance": {"measured_steps": 3}}),
               rec(3, "timeout", wall_s=900.2)]
    early, stalled = by_rule(records, "hang")
    (late,) = by_rule(records, "timeout")
    # Rule: a hang -> the compile budget (before any step) or the dataset workers (mid-run).
    assert early.trials == (1,) and "first step" in early.sentence
    for cited in ("180 s", "compile_timeout_s=180", "data.num_workers=1"):
        assert cited in early.sentence, (cited, early.sentence)
    assert stalled.trials == (2,) and "75 s" in stalled.sentence
    assert "data.num_workers=1" in stalled.sentence
    assert "900 s" in late.sentence and "wall_timeout_s=900" in late.sentence


def test_hang_rule_negative():
    # Rule: slow or crashed trials are not hangs.
    assert by_rule([rec(0, "slow"), rec(1, "crash")], "hang") == []


def test_slow_rule_blames_the_value_its_contrast_isolates():
    records = [rec(0, tokens_per_s=2000.0, params={"micro": 1, "threads": 2}),
               rec(1, tokens_per_s=1500.0, params={"micro": 1, "threads": 1}),
               rec(2, "slow", params={"micro": 4, "threads": 2},
                   card={"performance": {"tokens_per_s": 400.0}}),
               rec(3, "slow", params={"micro": 4, "threads": 1},
                   card={"performance": {"tokens_per_s": 600.0}})]
    (finding,) = by_rule(records, "slow")
    # Rule: slow -> the value a one-knob contrast shows slower than a trial that completed,
    # with that contrast (trials, gain, interval), and the numbers of the slow trials.
    for cited in ("2 trials", "#2, #3", "500 tokens/s median", "0.25 x", "2,000",
                  "micro=4 did it: #2 against #0, which differs only in micro=1: -80.0 % "
                  "(95 % interval -82.5..-77.1 %); 1 more such pair(s)"):
        assert cited in finding.sentence, (cited, finding.sentence)
    # Rule: a value measured slower alone, but whose slow trials are as slow as without it
    # (#3 against #2), is said as such, never as the cause.
    assert ("slower alone, but not what stopped them: threads=1 (#1 against #0, which "
            "differs only in threads=2: -25.0 %") in finding.sentence
    assert "threads=1 did it" not in finding.sentence
    assert finding.numbers["causes"] == 1 and finding.numbers["cleared"] == 0


def test_slow_rule_never_blames_a_value_that_only_came_alongside():
    # Trial 1 changed two knobs at once (as the first sampled proposals do) and was slow:
    # nothing isolates either value.
    records = [rec(0, tokens_per_s=2000.0, params={"mode": "graph", "prefetch": 2},
                   role="baseline"),
               rec(1, "slow", params={"mode": "pynative", "prefetch": 64},
                   card={"performance": {"tokens_per_s": 300.0}})]
    (finding,) = by_rule(records, "slow")
    # Rule: co-occurrence is said as such, with what would isolate it; no value is a cause.
    assert ("untested alongside, never changed alone: mode=pynative, prefetch=64 (no pair of "
            "trials isolates them: `sweep.neighbours=true`") in finding.sentence
    assert "did it" not in finding.sentence and finding.numbers["causes"] == 0
    # Rule: once a trial changes one of them alone, the contrast decides: prefetch=64 alone
    # is as fast as the baseline (within noise), so the slow trial's mode is...
    records.append(rec(2, tokens_per_s=1990.0, params={"mode": "graph", "prefetch": 64}))
    (finding,) = by_rule(records, "slow")
    assert "prefetch=64 did it" not in finding.sentence
    assert "measured alone, not a cause: prefetch=64 (#2 against #0" in finding.sentence
    # ... the one left untested (trial 1 against trial 2 isolates it: a gain, not a stop).
    assert "mode=pynative did it: #1 against #2, which differs only in mode=graph: -84.9 %" \
        in finding.sentence


def test_slow_rule_negative():
    # Rule: a value the pick also has explains nothing; no slow trials, no finding.
    records = [rec(0, tokens_per_s=2000.0, params={"threads": 2}),
               rec(1, "slow", params={"threads": 2})]
    (finding,) = by_rule(records, "slow")
    assert "carry no knob value the pick lacks" in finding.sentence
    assert by_rule(records[:1], "slow") == []


def test_crash_rule_points_at_the_log():
    tail = "--- stderr.log\nTraceback (most recent call last):\nRuntimeError: boom\n" \
           "--- stdout.log\nstep 1"
    records = [rec(5, "crash", wall_s=2.5, trial_dir="/runs/s/trial-0005",
                   detail="exited with code 1", attrs={"log_tail": tail})]
    (finding,) = by_rule(records, "crash")
    # Rule: crash -> the last stderr line and where the full log is.
    for cited in ("#5", "2.5 s", "RuntimeError: boom", "/runs/s/trial-0005/stderr.log"):
        assert cited in finding.sentence, (cited, finding.sentence)


def test_crash_rule_negative():
    # Rule: a crash without output says so; a reused copy of a crash is not a second crash.
    records = [rec(5, "crash", trial_dir="/t"), rec(6, "crash", reused_from=5, launched=False)]
    (finding,) = by_rule(records, "crash")
    assert finding.trials == (5,) and "no log output" in finding.sentence
    assert by_rule([rec(0, tokens_per_s=1.0)], "crash") == []


def test_not_run_rule():
    records = [rec(7, "infeasible", launched=False, detail="micro_batches < pp")]
    (finding,) = by_rule(records, "not_run")
    # Rule: trials never measured are listed with an example detail.
    assert "1 trial ended as infeasible (#7)" in finding.sentence
    assert "micro_batches < pp" in finding.sentence


def test_importance_needs_two_completed_trials(tmp_path):
    # Rule: under 2 completed trials the figure is a note, still a valid PNG.
    path = tmp_path / "importance.png"
    assert plots.importance([rec(0, tokens_per_s=1.0, params={"a": 1})], path) is False
    assert_png(path)


def test_importance_credits_the_knob_that_matters():
    # Only micro matters; workers=2 merely ran more often with the fast micro=1.
    design = [(1, 2), (1, 2), (1, 1), (2, 1), (2, 1), (2, 2)]
    records = [rec(i, tokens_per_s=1000.0 / m, params={"micro": m, "workers": w})
               for i, (m, w) in enumerate(design)]
    scores = plots.knob_importance(records)
    # Rule: a knob with no effect gets (almost) no credit for co-occurring with fast trials.
    assert list(scores) == ["micro", "workers"]
    assert scores["micro"] == pytest.approx(500.0, rel=0.01)
    assert scores["workers"] < 0.01 * scores["micro"]


def test_ablation_rows_change_exactly_one_knob():
    base = {"micro": 1, "threads": 2}
    records = [rec(0, tokens_per_s=1000.0, params=base, role="baseline", peak_memory_gib=1.0),
               rec(1, tokens_per_s=800.0, params=base | {"micro": 2}, peak_memory_gib=1.5),
               rec(2, tokens_per_s=900.0, params={"micro": 2, "threads": 1}),
               rec(3, "oom", params=base | {"micro": 4})]
    df = tables.ablation(records, cv=0.03)
    # Rule: every pair of trials one knob apart appears once (a stop against the trial that
    # completed), with its change, its interval and what it says; #2 against #0 (two
    # knobs apart) does not.
    assert list(zip(df["trial"], df["against"], df["knob"])) == [
        (1, 0, "micro"), (3, 0, "micro"), (3, 1, "micro"), (2, 1, "threads")]
    assert df.loc[0, "change %"] == pytest.approx(-20.0)
    assert df.loc[0, "peak change GiB"] == pytest.approx(0.5)
    assert df["reads"].tolist() == ["slower", "stopped it (oom)", "stopped it (oom)", "faster"]
    assert df.loc[0, "95 % interval"] == "-26.3..-13.2"


# --- end to end: a study as the sweep leaves it ---------------------------------------------

def assert_png(path: Path) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    shape = matplotlib.image.imread(path).shape
    assert len(shape) == 3 and shape[0] > 100 and shape[1] > 100, (path, shape)


def card(tps: float | None, peak: float, *, wait: float = 0.02) -> dict:
    perf = {"compile_s": 3.0, "data_wait_share": wait}
    if tps is not None:
        perf |= {"tokens_per_s": tps, "tokens_per_step": 256, "step_time_median_s": 256 / tps,
                 "mfu": tps / 50_000,
                 "measured_steps": 8}
    return {"correctness": {"nonfinite_steps": 0}, "performance": perf, "stability": {},
            "resources": {"peak_rss_gib_max_rank": peak, "memory_budget_gib": 8.0}}


def make_study(runs: Path, name: str, directions: list[str], *, n_trials: int = 8) -> int:
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    space = {"train.micro_batches": [1, 2, 4], "runtime.threads": [2, 1],
             "precision": ["fp32", "fp16"]}
    (runs / name).mkdir(parents=True)
    study = optuna.create_study(study_name=name, directions=directions,
                                storage=f"sqlite:///{runs / name / 'study.db'}")
    base = {"train.micro_batches": 1, "runtime.threads": 2, "precision": "fp32"}
    plan = [  # (params, reason, role, tokens/s, peak GiB, extra attrs)
        (base, "ok", "baseline", 2000.0, 0.5, {}),
        (base | {"train.micro_batches": 2}, "ok", "neighbour", 1000.0, 1.0, {}),
        (base | {"runtime.threads": 1}, "ok", "neighbour", 1100.0, 0.4, {}),
        (base | {"precision": "fp16"}, "diverged", "neighbour", None, 0.5, {}),
        (base | {"train.micro_batches": 4}, "oom", "neighbour", None, 9.0, {}),
        ({"train.micro_batches": 2, "runtime.threads": 1, "precision": "fp16"}, "crash",
         "sampled", None, 1.0, {"log_tail": "--- stderr.log\nRuntimeError: boom"}),
        ({"train.micro_batches": 4, "runtime.threads": 1, "precision": "fp16"}, "hang",
         "sampled", None, 2.0, {}),
        ({"train.micro_batches": 2, "runtime.threads": 2, "precision": "fp16"}, "slow",
         "sampled", None, 1.0, {}),
    ]
    states = {"ok": TrialState.COMPLETE, "crash": TrialState.FAIL, "hang": TrialState.FAIL}
    for i, (params, reason, role, tps, peak, extra) in enumerate(plan[:n_trials]):
        state = states.get(reason, TrialState.PRUNED)
        values = None
        if state is TrialState.COMPLETE:
            values = [tps, peak] if len(directions) == 2 else [tps]
        attrs = {"reason": reason, "launched": True, "role": role, "detail": f"{reason} #{i}",
                 "trial_dir": str(runs / name / f"trial-{i:04d}"), "micro_batch_size": 8,
                 "scorecard": card(tps if reason != "slow" else 300.0, peak)} | extra
        study.add_trial(create_trial(
            state=state, values=values, params=params, user_attrs=attrs,
            distributions={k: CategoricalDistribution(v) for k, v in space.items()}))
    return len(plan[:n_trials])


@pytest.mark.parametrize("directions", [["maximize"], ["maximize", "minimize"]])
def test_report_of_a_real_study(tmp_path, capsys, directions):
    import pandas as pd

    from autotune.cli import main

    runs = tmp_path / "runs"
    n_trials = make_study(runs, "rep", directions)
    code = main(["report", f"sweep.runs_dir={runs}", "sweep.study=rep", "workload=gpt_tiny"])
    out = capsys.readouterr().out
    assert code == 0
    report = runs / "rep" / "report"
    # Rule: every file exists; figures are real images.
    for name in REPORT_FILES:
        assert (report / name).is_file() and (report / name).stat().st_size > 0, name
    for name in REPORT_FILES:
        if name.endswith(".png"):
            assert_png(report / name)
    # Rule: one CSV row per trial, with start time and reason.
    csv = pd.read_csv(report / "experiments.csv")
    assert len(csv) == n_trials and {"started", "tokens/s", "reason"} <= set(csv.columns)
    # Rule: the index links every other file, and the console names the pick and index.
    index = (report / "index.md").read_text()
    for name in REPORT_FILES[:-1]:
        assert f"]({name})" in index, name
    assert "pick (what export and soak take): trial #0 (the baseline): 2,000 tokens/s" in out \
        and str(report / "index.md") in out
    assert "crash 1" in out and "oom 1" in out
    ablation = (report / "ablation.md").read_text()
    assert "train.micro_batches" in ablation and "-50.0" in ablation
    failures = (report / "failures.md").read_text()
    assert "## oom (1)" in failures and "crash #5" in failures
    diagnosis = (report / "diagnosis.md").read_text()
    assert "RuntimeError: boom" in diagnosis and "ran out of memory" in diagnosis


@pytest.mark.parametrize("n_trials", [0, 1])
def test_report_of_a_study_with_too_few_trials(tmp_path, capsys, n_trials):
    from autotune.cli import main

    runs = tmp_path / "runs"
    make_study(runs, "few", ["maximize"], n_trials=n_trials)
    out = tmp_path / "out"
    code = main(["report", f"sweep.runs_dir={runs}", "sweep.study=few", "workload=gpt_tiny",
                 f"report.out={out}"])
    # Rule: with 0 or 1 trials every file is still written (figures carry a note instead).
    assert code == 0, capsys.readouterr().err
    for name in REPORT_FILES:
        assert (out / name).is_file(), name
        if name.endswith(".png"):
            assert_png(out / name)


def test_report_of_a_missing_study_is_one_line(tmp_path, capsys):
    from autotune.cli import main

    runs = tmp_path / "runs"
    code = main(["report", f"sweep.runs_dir={runs}", "sweep.study=nope", "workload=gpt_tiny"])
    err = capsys.readouterr().err
    # Rule: no study -> exit 2, one line naming the fix, nothing written.
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("autotune: error: ")
    assert "no study database" in err and not runs.exists()
    make_study(runs, "other", ["maximize"])
    code = main(["report", f"sweep.storage=sqlite:///{runs}/other/study.db", "sweep.study=nope",
                 "workload=gpt_tiny"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no study 'nope'" in err and "it has: other" in err


def test_started_column_is_the_trial_start(tmp_path):
    started = dt.datetime(2026, 1, 2, 3, 4, 5)
    df = tables.experiments([rec(0, tokens_per_s=1.0, params={"a": 1}, started=started)])
    assert df.loc[0, "started"] == "2026-01-02 03:04:05"
