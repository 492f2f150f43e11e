"""The plan's three modules unit by unit, in-process: the planner (what is enumerated, what
is ruled out and why, the ranking, a plan where nothing fits), plan_output (plan.csv's
frame, the shown and ruled-out tables, the closest points, the files ``make_plan``
writes) and simulate (the records a simulated trial writes). The verb end to end is
tests/plan/test_plan_command.py and tests/plan/test_plan_answers.py."""

from __future__ import annotations

import dataclasses
import functools
import json
import re

import numpy as np
import pytest

from autotune.plan import plan_output, planner, simulate
from autotune.plan.costmodel import CostModel
from autotune.plan.layout import Job
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import HELD_OUT_MEMORY_ERROR, Constants, MemoryFit
from autotune.settings import PlanSettings
from tests.fakes import trial_config
from trials.contract.events import EndRecord, Phase, StartRecord, StepRecord, SummaryRecord
from trials.contract.outcomes import Outcome
from trials.contract.schema import ConfigError, DType, TrialConfig
from trials.contract.trial_dir import TrialDir
from trials.contract.vocabulary import Recompute

#: Llama 2 7B on one node of 8 A100s (80 GiB each), global batch 8: the README's plan.
LLAMA_A100 = ("workload=llama2_7b", "hardware=gpu_a100")
#: One configuration of it that fits (41 GiB predicted) and the trial program can run.
FITTING_TRIAL = (*LLAMA_A100, "parallel.dp=2", "parallel.mp=4", "train.micro_batches=2",
                 "precision=fp16", "train.recompute=full", "run.warmup_steps=2",
                 "run.measure_steps=3")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A cache of this test's own: no fit another test (or the user) imported is loaded."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))


def priors_model(cfg: TrialConfig, nodes: int = 1) -> CostModel:
    """The cost model on the profile's priors (no imported fit): deterministic."""
    return CostModel(cfg.hardware, nodes, Constants.priors(cfg.hardware))


def with_budget(cfg: TrialConfig, gib: float) -> TrialConfig:
    return dataclasses.replace(cfg, guard=dataclasses.replace(cfg.guard, memory_budget_gib=gib))


def with_workload(cfg: TrialConfig, **fields) -> TrialConfig:
    return dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, **fields))


def with_supports(cfg: TrialConfig, **flags: bool) -> TrialConfig:
    hw = cfg.hardware
    return dataclasses.replace(cfg, hardware=dataclasses.replace(
        hw, supports={**hw.supports, **flags}))


def job(**kw) -> Job:
    base = dict(dp=1, mp=1, pp=1, global_batch=8, micro_batches=1, dtype=DType.float16)
    return Job(**{**base, **kw})


@functools.cache
def llama_plan(budget_gib: float = 80.0) -> list[planner.PlanPoint]:
    """Every point of the default plan of Llama 2 7B on 8 A100s (648 points, ~0.1 s)."""
    cfg = trial_config(*LLAMA_A100)
    return planner.plan(cfg, PlanSettings(), priors_model(cfg), budget_gib)


# -- planner: what is enumerated -------------------------------------------------------


@pytest.mark.parametrize("devices, count", [(1, 1), (8, 10), (12, 18)])
def test_splits_are_every_ordered_factorisation_of_the_devices(devices, count):
    out = planner.splits(devices)
    # Rule: every (dp, mp, pp) whose product is the device count, each once, and no other.
    assert all(dp * mp * pp == devices for dp, mp, pp in out)
    assert len(set(out)) == len(out) == count
    assert (devices, 1, 1) in out and (1, devices, 1) in out and (1, 1, devices) in out


def test_a_pinned_split_is_planned_alone_and_must_use_every_device():
    # (A bare value on the command line is a list of one: test_cli_errors.py.)
    assert planner.pinned_splits(PlanSettings(split=["2x4x1"]), 8) == [(2, 4, 1)]
    assert planner.pinned_splits(PlanSettings(split=["8x1x1", "1x2x4"]), 8) == [
        (8, 1, 1), (1, 2, 4)]
    assert planner.pinned_splits(PlanSettings(), 8) == planner.splits(8)
    # Rule: a split that does not use the cluster's devices is a ConfigError naming both.
    with pytest.raises(ConfigError, match=r"'3x1x1' uses 3 devices; the cluster has 8"):
        planner.pinned_splits(PlanSettings(split=["3x1x1"]), 8)


def test_micro_batch_counts_are_the_powers_of_two_dividing_a_replicas_batch():
    # Rule: unpinned, every power of two that divides global batch / dp; pinned, the list.
    assert planner.micro_batch_counts(24, 2, PlanSettings()) == [1, 2, 4]
    assert planner.micro_batch_counts(8, 8, PlanSettings()) == [1]
    assert planner.micro_batch_counts(8, 16, PlanSettings()) == [1]  # never below one
    assert planner.micro_batch_counts(8, 1, PlanSettings(micro_batches=[3, 5])) == [3, 5]


def test_precisions_are_those_the_profile_runs_unless_pinned():
    cfg = trial_config(*LLAMA_A100)
    no_bf16 = with_supports(cfg, bf16=False)
    # Rule: unpinned, bf16 only where the profile supports it; pinned, exactly the names.
    assert set(planner.dtypes(cfg, PlanSettings())) == set(DType)
    assert DType.bfloat16 not in planner.dtypes(no_bf16, PlanSettings())
    assert planner.dtypes(no_bf16, PlanSettings(precisions=["bf16"])) == [DType.bfloat16]


def test_enumeration_skips_knobs_that_change_nothing_for_a_split():
    cfg = trial_config(*LLAMA_A100)
    jobs = planner.enumerate_jobs(cfg, PlanSettings(), 8)
    # Rule: sequence parallel needs mp > 1 and an optimizer shard dp > 1: the point without
    # them is the same job, so it is enumerated once.
    assert not [j for j in jobs if j.sequence_parallel and j.mp == 1]
    assert not [j for j in jobs if j.shard_level and j.dp == 1]
    assert any(j.sequence_parallel for j in jobs) and any(j.shard_level for j in jobs)
    # Rule: every job plans the workload's global batch, with our trial's fp32 accumulator,
    # and each (split, m, recompute, SP, shard, dtype) appears once.
    assert {j.global_batch for j in jobs} == {cfg.train.global_batch}
    assert all(j.fp32_accumulator for j in jobs)
    keys = [(j.split, j.micro_batches, j.recompute, j.sequence_parallel, j.shard_level,
             j.dtype) for j in jobs]
    assert len(set(keys)) == len(keys)
    pinned = planner.enumerate_jobs(cfg, PlanSettings(split=["8x1x1"], recompute=["full"],
                                                      precisions=["fp16"],
                                                      global_batch=32), 8)
    assert {(j.split, j.recompute, j.dtype, j.global_batch) for j in pinned} == {
        ("8x1x1", Recompute.full, DType.float16, 32)}
    assert sorted({j.micro_batches for j in pinned}) == [1, 2, 4]


# -- planner: what is ruled out, and why -----------------------------------------------


@pytest.mark.parametrize("workload, point, needle", [
    ({}, dict(micro_batches=3), "global batch 8 is not divisible by 3 micro-batches x dp 1 "
     "(the nearest that is: 9)"),
    ({}, dict(dp=2, micro_batches=3), "(the nearest that is: 12)"),
    ({}, dict(pp=4, micro_batches=2), "micro-batches 2 < pipeline stages 4"),
    ({"n_layers": 4}, dict(pp=8, micro_batches=8), "workload.n_layers=4 leaves a pipeline "
     "stage of pp=8 without a layer"),
    ({"kv_heads": 4}, dict(mp=8), "workload.kv_heads=4 is not divisible by parallel.mp=8"),
])
def test_a_split_that_breaks_a_structural_rule_says_which(workload, point, needle):
    cfg = with_workload(trial_config(*LLAMA_A100), **workload)
    # Rule: the structural rules are checked before any memory, each with its own words.
    reason = planner.structural_reason(cfg, cfg.workload, job(**point))
    assert reason is not None and needle in reason


def test_what_the_profile_cannot_run_is_ruled_out_by_the_profile():
    cfg = with_supports(trial_config(*LLAMA_A100), pipeline_parallel=False, bf16=False)
    # Rule: capabilities the profile lacks rule a point out, naming the profile.
    assert "pipeline parallel (parallel.pp=2) is not available on the GPU backend" in (
        planner.structural_reason(cfg, cfg.workload, job(pp=2, micro_batches=2)))
    assert "bf16 is not available" in planner.structural_reason(
        cfg, cfg.workload, job(dtype=DType.bfloat16))
    assert planner.structural_reason(cfg, cfg.workload, job(mp=8)) is None


def test_uneven_stages_and_tensor_parallel_across_nodes_are_flagged_not_ruled_out():
    cfg = with_workload(trial_config(*LLAMA_A100), n_layers=30)
    points = planner.plan(cfg, PlanSettings(split=["2x1x4"], micro_batches=[4],
                                            recompute=["full"], precisions=["fp16"]),
                          priors_model(cfg), 80.0)
    # Rule: 30 layers on 4 stages are planned (predicted, not ruled out by the layers) and
    # say how they split, the extra layers on the last stages.
    assert points and all(p.prediction is not None for p in points)
    assert all(p.flags == ("uneven stages 2x7 + 2x8 layers",) for p in points)
    assert not any("layer" in (p.reason or "") for p in points)
    # Rule: tensor parallel wider than a node is flagged with the nodes it spans.
    dims = ModelDims.of(trial_config(*LLAMA_A100).workload)
    assert planner.flags(dims, job(mp=16), 8, 2) == ("t=16 spans 2 nodes",)
    assert planner.flags(dims, job(mp=8), 8, 2) == ()


def test_a_point_over_the_budget_is_predicted_and_says_why_in_memory_terms():
    points = llama_plan()
    over = [p for p in points if p.prediction is not None and not p.fits]
    tight = [p for p in points if p.tight]
    assert over and tight
    # Rule: ruled out by memory only when even the optimistic end of the interval is over
    # the budget, and the reason is the breakdown "... > 80 GiB".
    assert all(p.memory_fit is MemoryFit.OVER for p in over)
    assert all(p.prediction.peak_gib * (1 - HELD_OUT_MEMORY_ERROR) > 80 for p in over)
    assert all(re.search(r"\(x[\d.]+ allocator\) > 80 GiB$", p.reason) for p in over)
    # Rule: a point whose interval holds the budget is kept, and said tight.
    assert all(p.fits and p.prediction.peak_gib * (1 + HELD_OUT_MEMORY_ERROR) > 80
               and p.prediction.peak_gib * (1 - HELD_OUT_MEMORY_ERROR) <= 80 for p in tight)
    # Rule: a point ruled out before a prediction has a reason and no prediction.
    assert all(p.reason for p in points if p.prediction is None)


# -- planner: the ranking, and when nothing fits ---------------------------------------


def test_fitting_points_come_first_fastest_first_then_least_memory():
    points = llama_plan()
    fits = [p.fits for p in points]
    predicted = [p.prediction is not None for p in points]
    # Rule: fitting points, then predicted ones ruled out, then the unpredicted.
    assert fits == sorted(fits, reverse=True) and any(fits) and not all(fits)
    assert predicted == sorted(predicted, reverse=True)
    fitting = [p.prediction for p in points if p.fits]
    # Rule: best predicted tokens/s first, so (one global batch) the shortest step time
    # first; at equal speed the least peak memory first.
    speeds = [p.tokens_per_s for p in fitting]
    assert speeds == sorted(speeds, reverse=True)
    steps = [p.step_s for p in fitting]
    assert all(a <= b * (1 + 1e-9) for a, b in zip(steps, steps[1:]))
    for a, b in zip(fitting, fitting[1:]):
        if a.tokens_per_s == b.tokens_per_s:
            assert a.peak_gib <= b.peak_gib


def test_when_nothing_fits_every_point_is_still_listed_with_its_reason():
    cfg = trial_config(*LLAMA_A100)
    points = llama_plan(budget_gib=1.0)
    # Rule: nothing fits in 1 GiB, and the plan is still every enumerated point, each
    # with why, the predicted ones (least memory over the budget first among equals) first.
    assert len(points) == len(planner.enumerate_jobs(cfg, PlanSettings(), 8))
    assert not any(p.fits for p in points) and all(p.reason for p in points)
    assert any(p.prediction is not None for p in points)
    predicted = [p.prediction is not None for p in points]
    assert predicted == sorted(predicted, reverse=True)


def test_an_override_of_a_knob_plan_enumerates_is_refused_with_its_pin():
    # Rule: overrides of the knobs plan enumerates name the plan setting that pins them.
    assert "pin it with plan.split=[DPxMPxPP]" in planner.ignored_override(["parallel.dp=8"])
    assert "pin it with plan.micro_batches=[M]" in planner.ignored_override(
        ["train.global_batch=16", "train.micro_batches=2"])
    assert "plan.recompute=[MODE]" in planner.ignored_override(["+train.recompute=full"])
    assert "plan.precisions=[NAME]" in planner.ignored_override(["precision=fp16"])
    # Rule: other knobs, and keys that only start with a pinned knob's letters, pass.
    assert planner.ignored_override(["train.global_batch=16", "workload=llama2_7b"]) is None
    assert planner.ignored_override(["train.micro_batches_x=2", "precisionX=1"]) is None


# -- plan_output: plan.csv's frame and the tables --------------------------------------


def test_the_frame_has_a_row_per_point_ranked_only_where_it_fits():
    points = llama_plan()
    df = plan_output.frame(points)
    assert len(df) == len(points)
    # Rule: the documented columns, the memory and step-time breakdowns among them.
    assert {"rank", "split", "dp", "mp", "pp", "micro_batches", "micro_batch_size",
            "recompute", "seq_parallel", "opt_shard", "precision", "tokens_per_s", "mfu",
            "step_s", "peak_gib", "fits", "tight", "reason", "flags"} <= set(df.columns)
    assert {"mem_activations_gib", "mem_optimizer_states_gib", "time_compute_s"} <= set(
        df.columns)
    # Rule: ranks 1..n run over the fitting rows' predictions in order (rows predicted
    # alike, fp16 and bf16 here, share one); ruled-out rows have none, and have their
    # reason.
    fitting = df[df["fits"]]
    ranks = list(fitting["rank"])
    assert ranks == sorted(ranks) and sorted(set(ranks)) == list(range(1, max(ranks) + 1))
    assert fitting.groupby("rank")["tokens_per_s"].nunique().eq(1).all()
    assert len(set(ranks)) < len(ranks)
    assert df.loc[~df["fits"], "rank"].isna().all()
    assert (df.loc[~df["fits"], "reason"] != "").all() and (fitting["reason"] == "").all()
    assert set(df["precision"]) == {"fp32", "fp16", "bf16"}


def test_a_frame_with_nothing_predicted_still_has_the_predicted_columns():
    cfg = trial_config(*LLAMA_A100)
    points = planner.plan(cfg, PlanSettings(split=["8x1x1"], global_batch=7),
                          priors_model(cfg), 80.0)
    assert points and all(p.prediction is None for p in points)
    df = plan_output.frame(points)
    # Rule: numeric predicted columns, empty (NaN), so the frame reads like any other.
    for col in ("tokens_per_s", "mfu", "step_s", "peak_gib"):
        assert df[col].isna().all() and df[col].dtype.kind == "f"
    assert not df["fits"].any() and df["rank"].isna().all()
    # Rule: no fitting row, no table.
    assert plan_output.shown_table(df, 15).empty


def test_the_shown_table_folds_rows_the_model_cannot_tell_apart():
    df = plan_output.frame(llama_plan())
    shown = plan_output.shown_table(df, 5)
    # Rule: at most `limit` rows, columns as the table names them, MFU as a percentage.
    assert len(shown) == 5
    assert {"rank", "dp x mp x pp", "m", "tokens/s", "step s", "MFU %", "peak GiB",
            "fit"} <= set(shown.columns)
    first = df[df["fits"]].iloc[0]
    assert shown["rank"].iloc[0] == 1
    assert shown["MFU %"].iloc[0] == pytest.approx(first["mfu"] * 100)
    # Rule: fp16 and bf16 predict the same on an A100: one row stands for both and says so.
    assert (shown["same for"] == "precision fp16/bf16").all()
    assert len(set(zip(shown["tokens/s"], shown["peak GiB"]))) == len(shown)
    # Rule: "fit" says tight exactly where the point is tight.
    tight = df[df["fits"]].drop_duplicates("rank").set_index("rank").loc[shown["rank"], "tight"]
    assert list(shown["fit"]) == ["tight" if t else "yes" for t in tight]
    # Rule: the ranks shown run 1, 2, 3 (a folded row does not leave a gap).
    assert list(shown["rank"]) == [1, 2, 3, 4, 5]


def test_ruled_out_points_are_counted_by_the_class_of_their_reason():
    df = plan_output.frame(llama_plan())
    summary = plan_output.ruled_out_summary(df)
    # Rule: one row per class (numbers as N, every memory breakdown one class), the counts
    # adding up to the ruled-out points, most frequent first, each with an example.
    assert int(summary["points"].sum()) == int((~df["fits"]).sum())
    assert list(summary["points"]) == sorted(summary["points"], reverse=True)
    classes = set(summary["ruled out because"])
    assert classes == {"micro-batches N < pipeline stages N", plan_output.reason_class(
        "activations 1.0 GiB + states 2.0 GiB (x1.1 allocator) > 80 GiB")}
    # Rule: an example names its point as the ranked rows do (split, m, recompute, SP,
    # sharding, precision), so it is not read as one of them.
    assert summary["example"].str.match(
        r"\d+x\d+x\d+ m=\d+ (none|selective|full)( SP)?( opt shard)? (fp32|fp16|bf16): ").all()
    lines = plan_output.ruled_out_lines(summary)
    assert lines[0] == f"ruled out ({int(summary['points'].sum()):,}), by reason:"
    # Rule: each line carries its example's own numbers (a class alone reads "N").
    assert all(re.search(r"; e\.g\. \d+x\d+x\d+ m=\d+ [^:]+: .*\d", line) for line in lines[1:])


def test_when_nothing_fits_the_closest_come_least_memory_first_with_what_they_lack():
    cfg = trial_config(*LLAMA_A100)
    settings = PlanSettings(split=["8x1x1"], micro_batches=[1, 2], recompute=["none"],
                            precisions=["fp16"])
    df = plan_output.frame(planner.plan(cfg, settings, priors_model(cfg), 30.0))
    assert not df["fits"].any()
    near = plan_output.closest(df, 30.0)
    peaks = list(near["peak GiB"].dropna())
    # Rule: the predicted points first, least memory first, each lacking its optimistic
    # peak less the budget; then one point of each reason ruled out before a prediction.
    assert len(peaks) == 2 and peaks == sorted(peaks)
    for peak, lacks in zip(peaks, near["what it lacks"]):
        assert lacks.startswith(f"{peak * (1 - HELD_OUT_MEMORY_ERROR) - 30:,.1f} GiB of memory")
    assert near["what it lacks"].iloc[-1].startswith(
        "global batch 8 is not divisible by 2 micro-batches x dp 8")
    assert len(near) == 3


# -- plan_output: make_plan's files and lines ------------------------------------------


def test_make_plan_writes_the_plan_files_and_returns_the_ranked_lines(tmp_path):
    cfg = trial_config(*LLAMA_A100)
    out = tmp_path / "plan"
    settings = PlanSettings(out=str(out), split=["2x4x1", "8x1x1"], precisions=["fp16"],
                            show=4)
    lines = plan_output.make_plan(cfg, settings, tmp_path / "runs")
    # Rule: plan.csv, plan.md and both figures in plan.out, nothing under runs_dir.
    assert sorted(p.name for p in out.iterdir()) == ["breakdown.png", "plan.csv", "plan.md",
                                                     "plan.png"]
    assert not (tmp_path / "runs").exists()
    with (out / "plan.csv").open() as f:
        header = f.readline().strip().split(",")
        rows = f.read().splitlines()
    assert header[:3] == ["rank", "split", "dp"] and "reason" in header
    # Rule: plan.csv holds every enumerated point, and the counts printed are its counts.
    jobs = planner.enumerate_jobs(cfg, settings, 8)
    fitting = sum(1 for p in planner.plan(cfg, settings, priors_model(cfg), 80.0) if p.fits)
    assert len(rows) == len(jobs)
    assert f"{fitting} of {len(jobs)} configurations fit" in "\n".join(lines)
    # Rule: the title and the global batch with its source come first; the path last.
    assert lines[0] == "llama2_7b on 1 x gpu_a100 (8 devices, 80 GiB each), global batch 8"
    assert lines[1].startswith("global batch 8 (train.global_batch")
    assert lines[-1] == f"plan: {out.resolve() / 'plan.md'} (step-time breakdown: breakdown.png)"
    md = (out / "plan.md").read_text()
    assert "## Best predicted configurations" in md and "## Ruled out" in md


def test_make_plan_where_nothing_fits_answers_with_the_closest(tmp_path):
    cfg = with_budget(trial_config(*LLAMA_A100), 20.0)
    out = tmp_path / "plan"
    lines = plan_output.make_plan(cfg, PlanSettings(out=str(out), split=["8x1x1"],
                                                    precisions=["fp16"]), tmp_path)
    # Rule: nothing fitting is an answer (the closest and what each lacks), not an error.
    assert "No configuration fits. The closest, and what each lacks:" in lines
    assert "## No configuration fits" in (out / "plan.md").read_text()
    assert "0 of " in "\n".join(lines)


def test_make_plan_needs_the_models_dimensions_and_writes_nothing_without_them(tmp_path):
    cfg = with_workload(trial_config(*LLAMA_A100), entry="mypkg.model:build")
    # Rule: a user workload (workload.entry) cannot be planned: one ConfigError, no files.
    with pytest.raises(ConfigError, match="plan needs the model's dimensions"):
        plan_output.make_plan(cfg, PlanSettings(out=str(tmp_path / "plan")), tmp_path)
    assert not (tmp_path / "plan").exists()


def test_the_plan_directory_is_plan_out_else_under_the_runs_dir(tmp_path):
    cfg = trial_config(*LLAMA_A100)
    # Rule: plan.out wins; else <runs_dir>/plan/<workload>-<hardware>-<nodes>n.
    assert plan_output.plan_directory(cfg, PlanSettings(out=str(tmp_path / "x")),
                                      tmp_path) == tmp_path / "x"
    assert plan_output.plan_directory(cfg, PlanSettings(nodes=2), tmp_path) == (
        tmp_path / "plan" / "llama2_7b-gpu_a100-2n")
    # Rule: any other override that shapes the plan (a cluster's links, a model's depth)
    # gets a directory of its own; where runs go, and what the name says, do not.
    def name(*overrides: str) -> str:
        return plan_output.plan_directory(cfg, PlanSettings(nodes=2), tmp_path, overrides).name

    links, depth = name("hardware.inter_node.bandwidth_gbs=6.25"), name("workload.n_layers=70")
    assert len({name(), links, depth}) == 3 and links.startswith("llama2_7b-gpu_a100-2n-")
    assert name("workload=llama2_7b", "hardware=gpu_a100", "sweep.runs_dir=elsewhere") == name()
    assert name("workload.n_layers=70", "plan.nodes=2") == depth


# -- simulate: the records of a simulated trial ----------------------------------------


class Collected(list):
    """A metrics log that keeps the records in order."""

    def emit(self, record) -> None:
        self.append(record)


def trial_config_file(tmp_path, *overrides: str):
    return TrialDir(tmp_path / "trial").write_config(trial_config(*overrides))


def test_a_simulated_trial_writes_start_every_step_summary_and_end(tmp_path):
    cfg = trial_config(*FITTING_TRIAL)
    records, code = simulate.simulated_run(trial_config_file(tmp_path, *FITTING_TRIAL), [], 7)
    predicted = CostModel.for_profile(cfg.hardware).predict_config(cfg)
    start, steps, summary, end = records[0], records[1:-2], records[-2], records[-1]
    # Rule: start, one step per compile + warm-up + measured step, the summary, the end:
    # OK, exit 0.
    assert isinstance(start, StartRecord) and isinstance(summary, SummaryRecord)
    assert isinstance(end, EndRecord) and end.outcome is Outcome.OK and code == 0
    assert all(isinstance(s, StepRecord) for s in steps)
    assert [s.phase for s in steps] == [Phase.COMPILE] + [Phase.WARMUP] * 2 + [Phase.MEASURE] * 3
    assert start.total_steps == len(steps) == 6 and start.world_size == 8
    # Rule: every record says it is simulated, and carries the model's prediction.
    assert start.applied["simulated"] is True and summary.performance["simulated"] is True
    assert start.tokens_per_step == predicted.tokens_per_step
    assert all(s.tokens == predicted.tokens_per_step for s in steps)
    assert all(s.peak_rss_gib == predicted.peak_gib for s in steps)
    # Rule: the step times are the predicted step time with noise (a few per cent), the
    # compile step ten times one.
    steady = [s.step_s for s in steps[1:]]
    assert all(abs(t / predicted.step_s - 1) < 0.3 for t in steady)
    assert steps[0].step_s > 5 * max(steady)
    assert summary.performance["tokens_per_s"] == pytest.approx(
        predicted.tokens_per_s, rel=0.3)


def test_a_simulated_trial_is_seeded(tmp_path):
    path = trial_config_file(tmp_path, *FITTING_TRIAL)
    times = lambda seed: [r.step_s for r in simulate.simulated_run(path, [], seed)[0]  # noqa: E731
                          if isinstance(r, StepRecord)]
    # Rule: one seed, the same records; another seed, other step times.
    assert times(7) == times(7)
    assert times(7) != times(8)


def test_a_simulated_trial_over_its_budget_ends_oom_after_its_first_step(tmp_path):
    path = trial_config_file(tmp_path, *FITTING_TRIAL)
    records, code = simulate.simulated_run(path, ["guard.memory_budget_gib=10"], 7)
    # Rule: a predicted peak over the budget is an OOM at the first step: no summary,
    # the OOM's exit code, and the reason with both numbers.
    assert [type(r) for r in records] == [StartRecord, StepRecord, EndRecord]
    assert records[-1].outcome is Outcome.OOM and code == Outcome.OOM.exit_code
    assert re.fullmatch(r"simulated: predicted peak [\d.]+ GiB over the memory budget "
                        r"10\.00 GiB", records[-1].reason)


def test_what_cannot_be_simulated_is_a_config_error(tmp_path):
    # Rule: a config that does not load or validate writes nothing and exits CONFIG_ERROR.
    assert simulate.simulated_run(tmp_path / "missing.yaml", [], 1) == (
        [], Outcome.CONFIG_ERROR.exit_code)
    path = trial_config_file(tmp_path, *FITTING_TRIAL)
    assert simulate.simulated_run(path, ["train.recompute=selective"], 1) == (
        [], Outcome.CONFIG_ERROR.exit_code)
    # Rule: a profile without a peak for the dtype, or a user workload, starts and ends
    # CONFIG_ERROR with why, before any step.
    cfg = trial_config(*FITTING_TRIAL)
    no_peak = dataclasses.replace(cfg, hardware=dataclasses.replace(
        cfg.hardware, peak_tflops={"float32": 19.5}))
    log = Collected()
    outcome, reason = simulate.simulate(no_peak, log, np.random.default_rng(0))
    assert outcome is Outcome.CONFIG_ERROR and [type(r) for r in log] == [StartRecord]
    assert reason == "hardware profile gpu_a100 has no peak FLOP/s for float16"
    log = Collected()
    outcome, reason = simulate.simulate(with_workload(cfg, entry="mypkg.model:build"), log)
    assert outcome is Outcome.CONFIG_ERROR and [type(r) for r in log] == [StartRecord]
    assert "user workload" in reason and log[0].tokens_per_step is None


def test_the_simulator_program_writes_its_records_to_the_metrics_file(tmp_path):
    path = trial_config_file(tmp_path, *FITTING_TRIAL)
    metrics = tmp_path / "metrics.jsonl"
    code = simulate.main(["--config", str(path), f"run.metrics_path={metrics}"])
    events = [json.loads(line)["event"] for line in metrics.read_text().splitlines()]
    # Rule: called like the trial program, it writes the same kinds of record to its
    # metrics file and exits with the outcome's code.
    assert code == 0
    assert events == ["start"] + ["step"] * 6 + ["summary", "end"]


def test_a_calibrated_plan_does_not_overwrite_the_plan_at_the_priors(tmp_path, cache):
    import dataclasses

    from autotune.plan import calibration

    cfg = trial_config(*LLAMA_A100)
    settings = PlanSettings(nodes=2, show=3)
    at_priors = plan_output.make_plan(cfg, settings, tmp_path)[-1]
    prior = Constants.priors(cfg.hardware)
    calibration.save("gpu_a100", dataclasses.replace(prior, source="calibrate: a fit"),
                     tmp_path / "cache")
    fitted = plan_output.make_plan(cfg, settings, tmp_path)[-1]
    # Rule: the same command planned from other constants writes a directory of its own
    # (the calibrated plan overwrote the one at the priors).
    assert at_priors != fitted and "llama2_7b-gpu_a100-2n/" in at_priors
    assert len(list((tmp_path / "plan").iterdir())) == 2
