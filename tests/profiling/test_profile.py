"""Where the time goes: the step split, the diagnosis rules, and a real profile."""

from __future__ import annotations

import json

import pytest

from autotune.profiling import rules
from autotune.study.schema.profile import ProfileResult
from tests.fakes import trial_config
from trials.contract.breakdown import (
    CATEGORIES,
    MemoryCurve,
    MemoryStats,
    OpEvent,
    OpRow,
    StepWindow,
    category,
    downsample,
    split_steps,
    top_ops,
)
from trials.contract.performance import Performance


def op(name: str, start: float, dur: float) -> OpEvent:
    return OpEvent(name, name.rsplit("/", 1)[-1].split("-op")[0], start, dur)


def test_scope_names_map_to_the_parts_of_a_step():
    assert category(op("Default/scaled-ScaledLoss/model-GPT/MatMul-op1", 0, 1)) == "forward"
    assert category(op("Gradients/Default/scaled-ScaledLoss/Grad_MatMul/MatMul-op2", 0, 1)) \
        == "backward"
    assert category(op("Expand/_SoftmaxBackward/Mul-op3", 0, 1)) == "backward"
    assert category(op("Default/optimizer-AdamWeightDecay/AdamWeightDecay-op0", 0, 1)) \
        == "optimizer"
    assert category(op("Default/ReduceSum-op10", 0, 1)) == "optimizer"  # the update tail
    assert category(op("Default/grad_reducer-DistributedGradReducer/AllReduce-op0", 0, 1)) \
        == "communication"
    assert category(op("Default/model-GPT/BroadcastTo-op0", 0, 1)) == "forward"  # not a collective


def test_the_split_partitions_the_step_and_separates_overlapped_communication():
    # Two 100 us steps, 10 us of data wait each. Step 1: forward 20, backward 30 with an
    # all-reduce of 20 that half overlaps it, optimizer 10.
    windows = [StepWindow(0, 100, 10), StepWindow(100, 200, 10)]
    ops = []
    for base in (0, 100):
        ops += [op("Default/loss/MatMul-op0", base + 10, 20),
                op("Gradients/Default/MatMul-op1", base + 30, 30),
                op("Default/reducer/AllReduce-op0", base + 50, 20),
                op("Default/optimizer-Adam/Adam-op0", base + 70, 10)]
    split = split_steps(ops, windows)
    assert sum(split["shares"].values()) == pytest.approx(1.0)
    s = {k: v * 1e6 for k, v in split["seconds"].items()}  # microseconds per step
    assert s["forward"] == pytest.approx(20) and s["backward"] == pytest.approx(30)
    assert s["optimizer"] == pytest.approx(10) and s["data_wait"] == pytest.approx(10)
    assert s["communication"] == pytest.approx(10)  # only the exposed half
    assert split["communication"]["overlapped_s"] * 1e6 == pytest.approx(10)
    assert s["idle"] == pytest.approx(100 - 10 - 20 - 30 - 10 - 10)


def test_the_split_partitions_the_loops_period_not_only_fetch_to_loss():
    # Steps of 30 us from fetch to loss, in a loop whose period is 120 us: the loss check,
    # the metrics line and threads holding the GIL take the other 90.
    windows = [StepWindow(0, 30, 5, 120.0), StepWindow(120, 150, 5, 120.0)]
    ops = [op("Default/loss/MatMul-op0", base + 5, 20) for base in (0, 120)]
    split = split_steps(ops, windows)
    # Rule: the parts add up to the period, the step time every figure of a trial uses
    # (a small model's profile split 3.17 ms of a 12.5 ms period and left the rest out).
    assert split["step_s"] * 1e6 == pytest.approx(120)
    assert sum(split["seconds"].values()) * 1e6 == pytest.approx(120)
    assert split["seconds"]["between_steps"] * 1e6 == pytest.approx(90)
    # Rule: host time between steps counts as host time: the step is host-bound.
    found = rules.host_bound(rules.Evidence(trial=7, step_s=split["step_s"],
                                            shares=split["shares"]))
    assert found is not None and "75.0 % in the loop between steps" in found.sentence


def test_op_time_beyond_the_step_is_scaled_so_the_parts_still_add_up():
    windows = [StepWindow(0, 50, 0)]
    ops = [op("Default/a/MatMul-op0", 0, 40), op("Gradients/Default/MatMul-op1", 40, 40)]
    split = split_steps(ops, windows)
    assert split["seconds"]["idle"] == 0
    assert sum(split["seconds"].values()) * 1e6 == pytest.approx(50)


def test_top_ops_rank_op_types_by_time_per_step():
    windows = [StepWindow(0, 100, 0)]
    ops = [op("Default/a/MatMul-op0", 0, 30), op("Default/a/MatMul-op1", 30, 30),
           op("Default/a/GeLU-op0", 60, 10), op("Gradients/Default/a/MatMul-op2", 70, 20)]
    top = top_ops(ops, windows)
    assert [(r.type, r.category) for r in top] == [
        ("MatMul", "forward"), ("MatMul", "backward"), ("GeLU", "forward")]
    assert top[0].share == pytest.approx(0.6) and top[0].calls_per_step == 2
    # Rule: a share is of the loop's period, the step the split's table divides (a Cast
    # over the fetch-to-loss window alone read 20.4 % of a step the table put at 14.9 %).
    longer = top_ops(ops, [StepWindow(0, 100, 0, period_us=150)])
    assert longer[0].share == pytest.approx(60 / 150) and longer[0].ms_per_step == 0.06
    split = split_steps(ops, [StepWindow(0, 100, 0, period_us=150)])
    assert split["step_s"] == pytest.approx(150e-6)


def test_the_memory_mean_is_over_time_not_over_samples():
    from trials.contract.breakdown import memory_stats

    # 100 MiB held for 9 s, then a burst of ten samples near 0 within the last second.
    t = [0.0] + [9.0 + 0.1 * i for i in range(11)]
    v = [100.0] + [0.0] * 10 + [100.0]
    stats = memory_stats(v, t)
    assert stats.mean_mib == pytest.approx(90.0)
    assert memory_stats(v).mean_mib == pytest.approx(200 / 12)  # without times: per sample


def test_downsampling_keeps_the_peaks():
    t = list(range(10_000))
    v = [1.0] * 10_000
    v[5_003] = 9.0
    _, dv = downsample(t, v, 100)
    assert len(dv) == 100 and max(dv) == 9.0


# -- the rules: each fires on its condition and stays quiet without it ---------------------
def evidence(**kw) -> rules.Evidence:
    return rules.Evidence(trial=7, step_s=0.1, **kw)


@pytest.mark.parametrize("rule, firing, quiet, quoted", [
    (rules.communication, {"comm_share": 0.31}, {"comm_share": 0.12}, "31.0 %"),
    (rules.data_wait, {"shares": {"data_wait": 0.15}, "seconds": {"data_wait": 0.004}},
     {"shares": {"data_wait": 0.05}, "seconds": {"data_wait": 0.004}}, "15.0 %"),
    # Little data wait, but the step trains at half its rate alone: the pipeline probe.
    (rules.data_wait, {"shares": {"data_wait": 0.03}, "performance": Performance(
        pipeline_samples_per_s=320.0, compute_samples_per_s=284.0, samples_per_s=138.0)},
     {"shares": {"data_wait": 0.03}, "performance": Performance(
         pipeline_samples_per_s=320.0, compute_samples_per_s=284.0, samples_per_s=270.0)},
     "competes with the step for the cores"),
    (rules.dominant_op,
     {"top_ops": [OpRow(type="MatMul", category="forward", share=0.55, ms_per_step=55.0,
                         calls_per_step=4, example="Default/x/MatMul-op1")]},
     {"top_ops": [OpRow(type="MatMul", category="forward", share=0.35, ms_per_step=35.0,
                         calls_per_step=4, example="Default/x/MatMul-op1")]},
     "MatMul"),
    (rules.memory_peaks,
     {"memory": MemoryCurve(peak_mib=900.0, mean_mib=200.0, peak_over_mean=4.5, source="x")},
     {"memory": MemoryCurve(peak_mib=400.0, mean_mib=200.0, peak_over_mean=2.0, source="x")},
     "4.5x"),
    # The same shape on a near-empty curve: 0.03 MiB over a 450 MiB process is no peak.
    (rules.memory_peaks,
     {"memory": MemoryCurve(peak_mib=900.0, mean_mib=200.0, peak_over_mean=4.5, source="x",
                            rss=MemoryStats(peak_mib=1500.0))},
     {"memory": MemoryCurve(peak_mib=0.04, mean_mib=0.01, peak_over_mean=3.3, source="x",
                            rss=MemoryStats(peak_mib=450.0))},
     "4.5x"),
    (rules.slow_rank, {"rank_step_s": [0.100, 0.112], "dp": 2},
     {"rank_step_s": [0.100, 0.102], "dp": 2}, "rank 1"),
    (rules.host_bound, {"shares": {"idle": 0.387}}, {"shares": {"idle": 0.05}}, "38.7 %"),
    (rules.cast_overhead,
     {"top_ops": [OpRow(type="Cast", category="forward", share=0.12, ms_per_step=12.0),
                  OpRow(type="MatMul", category="forward", share=0.5, ms_per_step=50.0),
                  OpRow(type="Cast", category="backward", share=0.07, ms_per_step=7.0)]},
     {"top_ops": [OpRow(type="Cast", category="forward", share=0.04, ms_per_step=4.0),
                  OpRow(type="MatMul", category="forward", share=0.5, ms_per_step=50.0)]},
     "19.0 %"),
])
def test_each_rule_fires_on_its_condition_only_and_quotes_its_numbers(rule, firing, quiet,
                                                                      quoted):
    found = rule(evidence(**firing))
    assert found is not None and quoted in found.sentence and found.trials == (7,)
    assert rule(evidence(**quiet)) is None


def test_advice_leaves_out_what_the_run_already_has():
    from trials.contract.schema import knob_values

    idle = {"shares": {"idle": 0.387}}
    fresh = rules.host_bound(evidence(**idle)).sentence
    # Rule: with nothing known of the run, every move is advised.
    assert "runtime.mode=graph" in fresh and "runtime.jit_level=O1" in fresh
    # Rule: a run in graph mode with fusion on is not told to turn them on; the moves it
    # has not made stay, joined as one phrase.
    graph_o1 = dict(knob_values(trial_config()), **{"runtime.jit_level": "O1"})
    advised = rules.host_bound(evidence(settings=graph_o1, **idle)).sentence
    assert "runtime.mode=graph" not in advised and "jit_level" not in advised
    assert "a larger micro-batch" in advised and " or fewer runtime.threads" in advised
    # The same mechanism in every rule that advises a setting: fp32 is not told fp32.
    casts = {"top_ops": [OpRow(type="Cast", category="forward", share=0.2, ms_per_step=20.0)]}
    assert "precision=fp32" in rules.cast_overhead(evidence(**casts)).sentence
    fp32 = rules.cast_overhead(evidence(settings=knob_values(trial_config()), **casts))
    assert "precision=fp32" not in fp32.sentence and "one dtype" in fp32.sentence
    # Rule: nor is a knob the workload refuses advised (an image workload's own dataset
    # reads no MindRecord, it has no blocks to recompute): a new user followed the advice
    # "data=mindrecord" into a refusal.
    from trials.contract.knob_reach import BUILT_IN, Reach

    image = Reach("image_cnn", recompute=False,
                  data_knobs=frozenset({"num_workers", "multiprocessing"}))
    waits = {"shares": {"data_wait": 0.15}, "seconds": {"data_wait": 0.004}}
    assert "data=mindrecord" in rules.data_wait(evidence(reach=BUILT_IN, **waits)).sentence
    advised = rules.data_wait(evidence(reach=image, **waits)).sentence
    assert "data=mindrecord" not in advised and "data.multiprocessing" in advised
    peaks = {"memory": MemoryCurve(peak_mib=900.0, mean_mib=200.0, peak_over_mean=4.5,
                                   source="x")}
    assert "recompute" in rules.memory_peaks(evidence(**peaks)).sentence
    assert "recompute" not in rules.memory_peaks(evidence(reach=image, **peaks)).sentence


def test_the_slow_rank_rule_needs_more_than_one_rank():
    assert rules.slow_rank(evidence(rank_step_s=[0.1, 0.2], dp=1)) is None


# -- real MindSpore ------------------------------------------------------------------------
@pytest.mark.slow
def test_profile_a_tiny_config_lists_top_ops_splits_the_step_and_writes_a_trace(
        tmp_path, monkeypatch, capsys):
    from autotune.cli import main
    from tests.conftest import project_env

    monkeypatch.setenv("AUTOTUNE_CACHE", project_env()["AUTOTUNE_CACHE"])
    out = tmp_path / "prof"
    code = main(["profile", "workload=gpt_tiny", "profile.steps=5", f"profile.out={out}",
                 f"sweep.runs_dir={tmp_path / 'runs'}", "run.warmup_steps=1",
                 "run.measure_steps=3", "run.adaptive=false"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    p = ProfileResult.from_json(json.loads((out / "profile.json").read_text())).profile
    assert set(p.shares) == set(CATEGORIES)
    assert sum(p.shares.values()) == pytest.approx(1.0, abs=0.05)
    types = [r.type for r in p.top_ops]
    assert 1 <= len(types) <= 10 and "MatMul" in types
    assert p.seconds["forward"] > 0 and p.seconds["backward"] > 0
    assert p.seconds["optimizer"] > 0
    assert p.memory.peak_mib > 0 and p.overhead > 0
    trace = json.loads((out / "trace.json").read_text())
    assert any(e.get("cat") == "step" for e in trace["traceEvents"])
    assert (out / "profile.png").stat().st_size > 0 and any((out / "raw").iterdir())
    assert "Top operators" in printed and "MatMul" in printed


def test_profile_of_a_trial_that_is_not_in_the_study_is_bad_input(tmp_path, capsys):
    from autotune.cli import main

    code = main(["profile", "profile.trial=3", f"sweep.runs_dir={tmp_path}"])
    assert code == 2
    assert "run the sweep" in capsys.readouterr().err or not any(tmp_path.iterdir())
    assert not (tmp_path / "default" / "profile").exists()


def test_a_profile_out_holding_other_files_is_refused_and_left_alone(tmp_path, capsys):
    from autotune.cli import main
    from tests.cli.test_cli_errors import assert_one_line_error

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's own")
    code = main(["profile", "workload=gpt_tiny", f"profile.out={mine}",
                 f"sweep.runs_dir={tmp_path / 'runs'}"])
    # Rule: a profile empties its directory before it runs, so one that holds anything but
    # an earlier run is refused before anything is written.
    assert_one_line_error(code, capsys.readouterr().err, f"profile.out={mine} holds other files")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert not (tmp_path / "runs").exists()


def test_profile_without_a_trial_profiles_the_pick_and_an_override_the_composed_config(
        harness, monkeypatch):
    from autotune.cli import main
    from autotune.commands import profile as command

    space = harness.space("p", {"train.micro_batches": [1, 2]})
    harness.script()
    code, _, err = harness.run(space, "sweep.n_trials=2", "profile.after_sweep=false")
    assert code == 0, err
    asked = []
    monkeypatch.setattr(command, "profile_config",
                        lambda *a, trial, label, **k: asked.append((trial, label)))
    where = [f"sweep.runs_dir={harness.runs}", "sweep.study=s"]
    # Rule: without profile.trial, the study's pick is profiled (and titled with its
    # number); with an override of the trial configuration, the composed configuration.
    main(["profile", *where])
    main(["profile", *where, "precision=fp16"])
    pick = [r for r in harness.study().trials if r.state.name == "COMPLETE"]
    assert asked[0][0] in {t.number for t in pick} and asked[0][1] == f"trial {asked[0][0]}"
    assert asked[1] == (None, "composed: precision=fp16")
    # Rule: an override the pick already has (as workload.entry= on a study of your own
    # model, which every command takes) selects the pick, not the composed configuration.
    picked = next(t for t in pick if t.number == asked[0][0])
    main(["profile", *where, f"train.micro_batches={picked.params['train.micro_batches']}"])
    assert asked[2] == asked[0]
    # Rule: profile.trial=N re-runs the trial as it ran: an override it already has is
    # taken, one that sets it to something else is refused (one line, exit 2), not dropped
    # without a word (a new user's precision=fp16 on an fp32 trial was).
    number, size = picked.number, picked.params["train.micro_batches"]
    assert main(["profile", *where, f"profile.trial={number}",
                 f"train.micro_batches={size}"]) != 2
    assert asked[3] == (number, f"trial {number}")
    assert main(["profile", *where, f"profile.trial={number}", "precision=fp16"]) == 2
    assert len(asked) == 4


def test_profile_without_a_study_profiles_the_composed_config(tmp_path, monkeypatch):
    from autotune.cli import main
    from autotune.commands import profile as command

    asked = []
    monkeypatch.setattr(command, "profile_config",
                        lambda _runner, _cfg, out, *a, trial, label, **k:
                        asked.append((trial, label, out.name)))
    runs = f"sweep.runs_dir={tmp_path / 'runs'}"
    # Rule: a fresh checkout (no study yet) profiles the composed defaults, not an error.
    assert main(["profile", runs]) == 1  # nothing ran
    assert asked == [(None, "composed: the defaults", "composed")]
    # Rule: each set of trial overrides has a directory of its own (two composed profiles
    # overwrote each other in profile/composed).
    main(["profile", runs, "precision=fp16"])
    main(["profile", runs, "train.micro_batches=2"])
    named = [name for *_, name in asked[1:]]
    assert len(set(named)) == 2 and all(n.startswith("composed-") for n in named)
    # Rule: a study named on the command line must exist: a misspelt name is one line,
    # exit 2, nothing written (it profiled the composed configuration without a word).
    assert main(["profile", runs, "sweep.study=nosuch"]) == 2
    assert len(asked) == 3 and not (tmp_path / "runs" / "nosuch").exists()


def test_trial_config_overrides_are_told_from_the_orchestrators():
    from autotune.commands.profile import trial_overrides

    mixed = ["precision=fp16", "sweep.study=x", "train.micro_batches=2", "profile.steps=5",
             "hydra.searchpath=[a]"]
    assert trial_overrides(mixed) == ["precision=fp16", "train.micro_batches=2"]


@pytest.mark.parametrize("overhead, says_noise", [(0.902, True), (1.12, False)])
def test_a_negative_profiler_overhead_is_called_noise(overhead, says_noise):
    from autotune.profiling.profile import overhead_text

    text = overhead_text({"overhead": overhead, "unprofiled_step_s": 0.01})
    # Rule: a profiled step faster than the unprofiled ones is noise, and says so.
    assert ("within the step-time noise" in text) is says_noise, text
    # Rule: the two step times quoted are the ones the overhead compares (the loop's
    # period, profiled and not), so the figure and its numbers agree.
    assert f"the loop's period {10 * overhead:.2f} ms profiled against 10.00 ms" in text


@pytest.mark.parametrize("wait, probe", [
    (0.15, None), (0.05, None), (0.03, (320.0, 284.0, 138.0)), (0.03, (320.0, 284.0, 270.0)),
    (0.02, (110.0, 260.0, 100.0)),
])
def test_report_and_profile_agree_on_whether_a_run_is_input_bound(wait, probe):
    from autotune.report.diagnosis import diagnose
    from tests.report.test_report import rec

    perf = {} if probe is None else dict(zip(
        ("pipeline_samples_per_s", "compute_samples_per_s", "samples_per_s"), probe))
    card = {"performance": {"data_wait_share": wait, **perf}}
    record = rec(0, tokens_per_s=100.0, role="baseline", data_wait_share=wait, card=card)
    reported = [f for f in diagnose([record]) if f.rule == "data_bound"]
    profiled = rules.data_wait(rules.from_performance(record.perf, trial=0))
    # Rule: one rule judges both: the report's diagnosis and profile's rules say input-bound
    # for the same run, or neither does.
    assert bool(reported) == (profiled is not None)


def test_what_the_hardware_profile_cannot_run_is_refused_before_the_profile_writes(
        tmp_path, capsys):
    from autotune.cli import main
    from tests.cli.test_cli_errors import assert_one_line_error

    # Rule: the capability rule the sweep's proposals apply holds for every command that
    # launches a configuration: bf16 on the CPU profile is one line, exit 2, nothing
    # written (profile ran the trial, which ended "unsupported" with exit 1).
    code = main(["profile", f"sweep.runs_dir={tmp_path / 'runs'}", "precision=bf16"])
    assert_one_line_error(code, capsys.readouterr().err, "bf16 is not available on the CPU",
                          "another hardware= profile")
    assert not (tmp_path / "runs").exists()


def test_a_workload_that_does_not_import_here_is_refused_before_the_profile_writes(tmp_path,
                                                                                   capsys):
    from autotune.cli import main
    from tests.cli.test_cli_errors import assert_one_line_error

    # A study of your own model, profiled from a shell without the sweep's PYTHONPATH.
    code = main(["profile", f"sweep.runs_dir={tmp_path / 'runs'}",
                 "workload.entry=no_such_module_here:make_workload", "workload.name=mine"])
    # Rule: one line naming PYTHONPATH, exit 2, nothing written (it ran the trial, which
    # failed with config_error, exit 1, after writing its profile directory).
    assert_one_line_error(code, capsys.readouterr().err, "cannot be imported", "PYTHONPATH")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("other_cores, flagged", [(1.3, True), (0.1, False)])
def test_a_profile_measured_under_load_says_so_and_keeps_its_conditions(other_cores, flagged):
    from rich.console import Console

    from autotune.profiling.profile import show
    from autotune.study.conditions import Conditions

    conditions = Conditions(other_cores=other_cores, window="measured steps",
                            window_s=4.0).judge(0.5)
    result = ProfileResult(label="trial 3", conditions=conditions)
    console = Console(record=True, width=200)
    show(result, console)
    printed = console.export_text()
    # Rule: a profile run over sweep.contention_cores of other load says its times are not
    # the quiet machine's, as a sweep's trial is flagged; a quiet one says nothing of it.
    assert ("measured under load (load 1.3" in printed) is flagged, printed
    assert ("above sweep.contention_cores=0.5" in printed) is flagged
    # Rule: the judged conditions are stored with the profile (profile.json, the study).
    back = ProfileResult.from_json(json.loads(json.dumps(result.to_json())))
    assert back.conditions == conditions and back.conditions.contended is flagged


@pytest.mark.parametrize("wait, says_ms", [(0.30, True), (0.01, False)])
def test_the_input_waits_milliseconds_go_with_its_share_only(wait, says_ms):
    # A run whose pipeline competes with the step (trains at 0.5 x its step alone).
    perf = Performance(pipeline_samples_per_s=500.0, compute_samples_per_s=100.0,
                       samples_per_s=50.0)
    e = rules.Evidence(trial=2, shares={"data_wait": wait},
                       seconds={"data_wait": 0.04 * wait}, performance=perf)
    (found,) = [f for f in rules.diagnose(e) if f.rule == "data_wait"]
    # Rule: the wait's milliseconds sit beside the wait's share; the probe's cost share
    # is not followed by them (it read "costs 39.8 % of the step (0.4 ms of input wait)").
    assert (f"waiting for input data, {40 * wait:.1f} ms a step" in found.sentence) is says_ms
    assert "ms of input wait" not in found.sentence and "of the step (" not in found.sentence
