"""`python -m autotune plan` end to end, the sweep's predicted_oom path with real trials,
and a simulated sweep of a space this machine cannot run."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pytest

from autotune.plan.predict import HELD_OUT_MEMORY_ERROR
from tests.cli.test_cli_errors import assert_one_line_error
from tests.conftest import ROOT, project_env


def autotune(*args: str, cwd=ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=cwd,
                          env=project_env(), capture_output=True, text=True, timeout=timeout)


def test_plan_llama2_70b_on_4_nodes_of_ascend_910b(tmp_path):
    out = tmp_path / "plan"
    proc = autotune("plan", "workload=llama2_70b", "hardware=ascend_910b", "plan.nodes=4",
                    f"plan.out={out}")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["breakdown.png", "plan.csv", "plan.md",
                                                     "plan.png"]
    rows = list(csv.DictReader((out / "plan.csv").open()))
    fitting = [r for r in rows if r["fits"] == "True"]
    ruled_out = [r for r in rows if r["fits"] == "False"]
    # Rule: every split of 32 devices is enumerated; every ruled-out point says why.
    assert {r["split"] for r in rows} >= {"32x1x1", "1x8x4", "4x8x1", "1x4x8"}
    assert fitting and ruled_out and all(r["reason"] for r in ruled_out)
    assert any("> 64 GiB" in r["reason"] for r in ruled_out)
    # Tensor parallel wider than a node is planned and flagged (issue 33), not ruled out;
    # 70B's 8 KV heads rule out t = 16 and 32 by the heads.
    assert not any("would span nodes" in r["reason"] for r in ruled_out)
    assert any("is not divisible by parallel.mp=16" in r["reason"] for r in ruled_out)
    # Ranked by predicted tokens/s; every fitting point fits 64 GiB at the optimistic end
    # of its memory interval, and one over 64 GiB at its predicted peak is flagged tight.
    speeds = [float(r["tokens_per_s"]) for r in fitting]
    assert speeds == sorted(speeds, reverse=True)
    assert all(float(r["peak_gib"]) * (1 - HELD_OUT_MEMORY_ERROR) <= 64 for r in fitting)
    assert all(r["tight"] == "True" for r in fitting if float(r["peak_gib"]) > 64)
    assert int(fitting[0]["rank"]) == 1 and "tokens/s" in proc.stdout
    md = (out / "plan.md").read_text()
    assert "Ruled out" in md
    # Rule: the terminal and plan.md print one table with one format per column: the
    # best row's cells read the same in both (the terminal had 2 decimals, plan.md 3).
    best_md = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    best_terminal = next(line for line in proc.stdout.splitlines()
                         if line.split() and line.split()[0] == "1")
    assert best_terminal.split() == " ".join(best_md.strip("|").split("|")).split()


def test_plan_takes_the_precision_names_and_recompute_modes_of_every_command(tmp_path):
    out = tmp_path / "plan"
    proc = autotune("plan", "workload=llama2_7b", "hardware=gpu_a100", "plan.precisions=[fp16]",
                    "plan.recompute=[none,full]", f"plan.out={out}")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((out / "plan.csv").open()))
    # Rule: plan.precisions and plan.recompute take the sweep's words, and plan.csv writes
    # them back the same way.
    assert rows and {r["precision"] for r in rows} == {"fp16"}
    assert {r["recompute"] for r in rows} == {"none", "full"}


def test_plan_on_an_accelerator_without_a_peak_says_to_add_it_to_the_profile(tmp_path):
    conf = tmp_path / "conf" / "hardware"
    conf.mkdir(parents=True)
    (conf / "nopeak.yaml").write_text("name: nopeak\nbackend: GPU\ndevices: 8\n"
                                      "device_memory_gib: 80.0\n"
                                      "intra_node: {bandwidth_gbs: 300.0}\n")
    proc = autotune("plan", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                    "hardware=nopeak", "workload=llama2_7b", "plan.precisions=[fp16]",
                    f"plan.out={tmp_path / 'plan'}")
    assert proc.returncode == 0, proc.stderr
    # Rule: the advice fits the backend: a GPU's peak is the profile's (the vendor's
    # figure), not a CPU calibration of this machine.
    assert "nopeak (GPU) has no peak FLOP/s for float16" in proc.stdout
    assert "add peak_tflops: {float16: N} to the profile" in proc.stdout
    assert "calibrate" not in proc.stdout


def test_plan_answers_about_pinned_splits_and_says_which_global_batch(tmp_path):
    out = tmp_path / "plan"
    proc = autotune("plan", "workload=llama2_7b", "hardware=gpu_a100", "plan.split=[8x1x1,2x4x1]",
                    "plan.precisions=[fp16,bf16]", f"plan.out={out}")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((out / "plan.csv").open()))
    # Rule: plan.split pins the splits planned, nothing else is enumerated.
    assert {r["split"] for r in rows} == {"8x1x1", "2x4x1"}
    # Rule: fp16 and bf16 predict the same speed and memory on an A100: plan.csv keeps
    # both, the shown table one row that says it stands for both.
    assert {r["precision"] for r in rows} == {"fp16", "bf16"}
    assert "precision fp16/bf16" in proc.stdout
    # Rule: the global batch planned for is printed with where it came from.
    assert "global batch 8 (train.global_batch, the workload's default" in proc.stdout


@pytest.mark.parametrize("overrides, needle", [
    (["workload=llama9"], "Could not find 'workload/llama9'"),
    (["workload=llama2_7b", "parallel.mp=3"], "is not divisible by parallel.mp=3"),
    (["workload=llama2_7b", "parallel.pp=3", "train.micro_batches=4", "train.global_batch=12"],
     "workload.n_layers=32 is not divisible by parallel.pp=3"),
    (["workload=llama2_7b", "hardware=ascend_910b", "hardware.intra_node.bandwidth_gbs=null"],
     "has no intra_node.bandwidth_gbs"),
    (["workload=llama2_7b", "hardware=ascend_910b", "plan.nodes=2",
      "hardware.inter_node.bandwidth_gbs=null"],
     "has no inter_node.bandwidth_gbs: the cost model needs it for 2 nodes; give it as "
     "hardware.inter_node.bandwidth_gbs=<GB/s>"),
    (["plan.nodes=0"], "plan.nodes=0 must be >= 1"),
    # A peak's null means "measure it here" on the CPU only; elsewhere it is unknown.
    (["workload=llama2_7b", "hardware=ascend_910b", "hardware.peak_tflops.bfloat16=abc"],
     "hardware.peak_tflops.bfloat16='abc' must be a positive number of TFLOP/s, or null where "
     "it is unknown (then no step time is predicted)"),
    (["hardware.peak_tflops.float32=0"], "must be a positive number of TFLOP/s, or null to "
     "measure it on this machine"),
    (["workload=llama2_7b", "hardware=ascend_910b", "hardware.peak_tflops.bf16=300"],
     "did you mean hardware.peak_tflops.bfloat16?"),
    # Old spellings: the one line names the word every command takes.
    (["plan.precisions=[float16]"], "plan.precisions: 'float16' is not a precision name; "
     "write fp16 (names: fp32, fp16, bf16)"),
    (["plan.precisions=[fp32,bfloat16]"], "'bfloat16' is not a precision name; write bf16"),
    (["plan.recompute=[true]"], "plan.recompute: 'true' is not a recompute mode; write full "
     "(modes: none, selective, full, selective_op)"),
    (["plan.recompute=[none,false]"], "'false' is not a recompute mode; write none"),
    # An override plan would ignore (it enumerates that knob) names the pin to use.
    (["workload=llama2_7b", "hardware=gpu_a100", "parallel.dp=8"],
     "plan ignores parallel.dp=8: it enumerates every value of parallel; pin it with "
     "plan.split=[DPxMPxPP]"),
    (["workload=llama2_7b", "hardware=gpu_a100", "precision=fp16"],
     "plan ignores precision=fp16"),
    (["workload=llama2_7b", "hardware=gpu_a100", "plan.split=[3x1x1]"],
     "plan.split value '3x1x1' uses 3 devices; the cluster has 8"),
    (["workload=llama2_7b", "hardware=gpu_a100", "plan.split=[8x1]"],
     "plan.split value '8x1' must look like 'DPxMPxPP'"),
])
def test_plan_bad_input_is_one_line(tmp_path, overrides, needle):
    proc = autotune("plan", *overrides, f"plan.out={tmp_path / 'plan'}")
    assert_one_line_error(proc.returncode, proc.stderr, needle)
    assert not (tmp_path / "plan").exists()


def test_a_preset_with_dimensions_only_is_not_launched(harness):
    space = harness.space("big", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "workload=llama2_7b", fake=False)
    assert_one_line_error(code, err, "has dimensions only", "sweep.simulate=true")
    assert not harness.runs.exists()


@pytest.mark.slow
def test_predicted_oom_is_ruled_out_before_launch_with_real_trials(harness):
    # 4,096 layers of the tiny GPT need gigabytes of states and activations; 2 layers run.
    space = harness.space("deep", {"workload.n_layers": [2, 4096]})
    code, out, err = harness.run(space, "sweep.n_trials=2", "guard.memory_budget_gib=3",
                                 "run.warmup_steps=1", "run.measure_steps=2", fake=False)
    assert code == 0, out + err
    trials = harness.study().trials
    by_layers = {t.params["workload.n_layers"]: t for t in trials}
    deep, shallow = by_layers[4096], by_layers[2]
    # Rule: predicted over budget -> not launched, told to Optuna as a memory constraint,
    # reported with its breakdown; the point that fits ran for real with its prediction kept.
    assert deep.user_attrs["reason"] == "predicted_oom" and not deep.user_attrs["launched"]
    assert deep.constraints["memory_over_budget_gib"] > 0 and "states" in deep.user_attrs["detail"]
    assert not (harness.runs / "s" / f"trial-{deep.number:04d}").exists()
    assert shallow.user_attrs["reason"] == "ok" and shallow.user_attrs["launched"]
    predicted = shallow.user_attrs["prediction"]
    assert 0 < predicted["peak_gib"] < 3 and predicted["memory_gib"]["optimizer_states"] > 0
    assert "predicted_oom" in out
    # The measured trial refitted the CPU profile's constants, stored in its study.
    from autotune.plan.fits import STUDY_FIT

    attrs = harness.study().user_attrs
    assert STUDY_FIT in attrs, out + err
    stored = attrs[STUDY_FIT]
    assert stored["constants"]["source"].startswith("fit of")
    assert stored["constants"]["source"].endswith("of study s")


def test_simulated_sweep_of_an_accelerator_space(harness, tmp_path):
    from autotune.cli import main

    overrides = [f"sweep.runs_dir={harness.runs}", "sweep.study=sim", "sweep.progress=false",
                 "search=accelerator", "hardware=ascend_910b", "workload=llama2_7b",
                 "sweep.simulate=true", "sweep.n_trials=6"]
    assert main(["sweep", *overrides]) == 0
    out = harness.capsys.readouterr().out
    study = harness.study("sim")
    reasons = [t.user_attrs.get("reason") for t in study.trials]
    # 7B on one 8-NPU node: the points that fit run as simulated trials, marked so
    # everywhere (the predicted_oom rule itself: test_predicted_oom_is_ruled_out_before...).
    assert "ok" in reasons
    # Rule: the baseline is launched even when predicted over budget: its measurement
    # corrects a model calibrated elsewhere (here the simulator confirms the OOM).
    assert study.trials[0].user_attrs["launched"] and reasons[0] == "oom"
    # Rule: a simulated trial runs out of memory exactly at the model's central peak, so
    # the model's picks and the sampler's proposals are judged on it (no interval): none
    # launched after the baseline runs out of memory (the picks did, at the interval).
    after = [t for t in study.trials[1:] if t.user_attrs.get("launched")]
    assert after and all(t.user_attrs["reason"] != "oom" for t in after), reasons
    assert any(t.user_attrs.get("role") == "predicted" for t in after)
    done = [t for t in study.trials if t.user_attrs.get("reason") == "ok"]
    assert all(t.user_attrs["scorecard"]["performance"]["simulated"] for t in done)
    # Rule: a simulated trial's time is computed: no run of it is judged as measured under
    # other processes' load (they were flagged "load 1.5", their gains widened).
    from autotune.settings import SweepConfig, validate_settings
    from trials.contract.compose import compose

    composed = compose("sweep", overrides, schema=SweepConfig)
    assert validate_settings(composed).sweep.contention_cores == math.inf
    assert not any((t.user_attrs.get("conditions") or {}).get("contended")
                   for t in study.trials)
    assert "(simulated)" in out
    assert main(["report", *overrides, f"report.out={tmp_path / 'report'}"]) == 0
    assert "SIMULATED" in harness.capsys.readouterr().out
    # confirm re-runs the finalists with the same (simulated) trial program.
    assert main(["confirm", *overrides, "confirm.top_k=1", "confirm.repeats=2"]) == 0
    confirmed = harness.study("sim").user_attrs["autotune.confirm"]
    assert len(next(iter(confirmed.values()))["tokens_per_s"]) == 2
    assert main(["export", *overrides, f"export.out={tmp_path / 'job'}"]) == 0
    provenance = json.loads((tmp_path / "job" / "provenance.json").read_text())
    assert provenance["predicted_memory"]["headroom_gib"] > 0
    assert "SIMULATED" in (tmp_path / "job" / "CHANGES.md").read_text()


def test_the_best_predicted_points_are_launched_first(harness):
    from autotune.cli import main

    overrides = [f"sweep.runs_dir={harness.runs}", "sweep.study=best", "sweep.progress=false",
                 "search=accelerator", "hardware=ascend_910b", "workload=llama2_13b",
                 "sweep.simulate=true", "sweep.n_trials=3", "sweep.predict.enqueue_best=2",
                 "sweep.predict.trust_time_error=1"]  # the priors' error (0.3): trusted here
    assert main(["sweep", *overrides]) == 0
    trials = harness.study("best").trials
    # Rule: after the baseline come the k points with the best predicted tokens/s.
    assert [t.user_attrs["role"] for t in trials[:3]] == ["baseline", "predicted", "predicted"]
    predicted = [t.user_attrs["prediction"]["tokens_per_s"] for t in trials[1:3]]
    assert predicted == sorted(predicted, reverse=True)


def test_an_untrusted_model_seeds_nothing(harness):
    from autotune.cli import main

    overrides = [f"sweep.runs_dir={harness.runs}", "sweep.study=untrusted",
                 "sweep.progress=false", "search=accelerator", "hardware=ascend_910b",
                 "workload=llama2_13b", "sweep.simulate=true", "sweep.n_trials=3",
                 "sweep.predict.enqueue_best=2", "sweep.predict.trust_time_error=0.15"]
    assert main(["sweep", *overrides]) == 0
    trials = harness.study("untrusted").trials
    # Rule: the priors' error (0.3) is over the threshold and simulated trials never refit
    # (no held-out ranking): the sampler chooses after the baseline.
    assert "predicted" not in [t.user_attrs.get("role") for t in trials]


def test_plan_png_plots_tokens_per_s_against_peak_memory_with_the_budget():
    import pandas as pd

    from autotune.plan.figure import tradeoff

    df = pd.DataFrame([
        {"rank": 1, "split": "8x1x1", "micro_batches": 1, "tokens_per_s": 900.0,
         "peak_gib": 50.0, "fits": True, "tight": False},
        {"rank": 2, "split": "4x2x1", "micro_batches": 2, "tokens_per_s": 800.0,
         "peak_gib": 62.0, "fits": True, "tight": True},
        {"rank": None, "split": "2x4x1", "micro_batches": 1, "tokens_per_s": 950.0,
         "peak_gib": 90.0, "fits": False, "tight": False},
        {"rank": None, "split": "1x1x8", "micro_batches": 1, "tokens_per_s": None,
         "peak_gib": None, "fits": False, "tight": False}])
    ax = tradeoff(df, title="t", budget_gib=64).axes[0]
    # Rule: every predicted point is a marker at (peak GiB, tokens/s); one without a
    # prediction is left out; the budget is a vertical line at 64 GiB.
    points = sorted(tuple(p) for c in ax.collections for p in c.get_offsets())
    assert points == [(50.0, 900.0), (62.0, 800.0), (90.0, 950.0)]
    assert [tuple(line.get_xdata()) for line in ax.lines] == [(64, 64)]
    assert "peak memory" in ax.get_xlabel() and "tokens/s" in ax.get_ylabel()
    assert tradeoff(df.iloc[3:], title="t", budget_gib=64) is None


def test_after_its_seeds_the_model_proposes_every_other_launch():
    import optuna

    from autotune.search.proposals import PREDICTED_ROLE, _follow_due
    from autotune.study.records import ROLE

    study = optuna.create_study()
    assert not _follow_due(study)  # nothing measured yet
    study.enqueue_trial({"x": 1.0}, user_attrs={ROLE: PREDICTED_ROLE})
    assert not _follow_due(study)  # a seed still waits
    study.optimize(lambda t: t.suggest_float("x", 0, 2), n_trials=1)
    assert not _follow_due(study)  # the newest launch was the model's: the sampler's turn
    study.optimize(lambda t: t.suggest_float("x", 0, 2), n_trials=1)
    assert _follow_due(study)  # the sampler's: the model's turn


def test_two_plans_of_one_workload_get_directories_of_their_own():
    from autotune.commands.plan import default_name
    from autotune.settings import PlanSettings, SweepConfig
    from trials.contract.compose import compose
    from trials.contract.schema import to_trial_config

    cfg = to_trial_config(compose("sweep", ["workload=llama2_7b", "hardware=gpu_a100"],
                                  schema=SweepConfig))
    plain = default_name(cfg, PlanSettings())
    bf16 = default_name(cfg, PlanSettings(precisions=["bf16"]))
    split = default_name(cfg, PlanSettings(split=["8x1x1"], global_batch=64))
    # Rule: the defaults keep the documented name; other plan settings add their digest,
    # so the README's two llama2_7b plans do not overwrite each other.
    assert plain == "llama2_7b-gpu_a100-1n"
    assert len({plain, bf16, split}) == 3 and bf16.startswith(plain + "-")
    assert default_name(cfg, PlanSettings(show=3, out="")) == plain  # not what is planned
    # Rule: and one plan spelled two ways is one directory: a list's order, the workload's
    # own global batch written out.
    assert default_name(cfg, PlanSettings(global_batch=cfg.train.global_batch)) == plain
    assert default_name(cfg, PlanSettings(split=["2x4x1", "8x1x1"])) == default_name(
        cfg, PlanSettings(split=["8x1x1", "2x4x1"]))
