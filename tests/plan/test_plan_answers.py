"""`python -m autotune plan` as a tool that never crashes (issue 33): a plan where nothing
fits is an answer, a bare split is a split, uneven pipeline stages and tensor parallel
across nodes are planned and flagged, the terminal table has step time and MFU, the
memory interval printed is the one applied, and a plan in a dtype the fit did not measure
says which constants are priors. All in-process, through autotune.cli.main."""

from __future__ import annotations

import csv
import dataclasses
import re

import pandas as pd
import pytest

from autotune.cli import main
from autotune.plan import calibration
from autotune.plan.predict import HELD_OUT_MEMORY_ERROR, Constants, memory_interval

#: BLOOM-176B (BigScience 2022, arXiv:2211.05100: 70 layers, h 14,336, 112 heads, vocabulary
#: padded to 250,880) on 48 nodes of 8 A100s, global batch 2,048: what the issue ran.
BLOOM = ["workload=gpt3_175b", "workload.name=bloom_176b", "workload.n_layers=70",
         "workload.d_model=14336", "workload.n_heads=112", "workload.vocab_size=250880",
         "hardware=gpu_a100", "plan.nodes=48", "plan.global_batch=2048"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A cache of this test's own: no fit another test (or the user) stored is loaded."""
    path = tmp_path / "cache"
    monkeypatch.setenv("AUTOTUNE_CACHE", str(path))
    return path


def plan(capsys, out, *overrides: str) -> tuple[int, str, list[dict]]:
    code = main(["plan", *overrides, f"plan.out={out}"])
    printed = capsys.readouterr()
    rows = list(csv.DictReader((out / "plan.csv").open())) if (out / "plan.csv").exists() else []
    return code, printed.out + printed.err, rows


@pytest.mark.parametrize("batch", [7, 4])
def test_nothing_fits_before_a_prediction_is_an_answer_not_a_traceback(tmp_path, capsys, batch):
    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, "workload=llama2_7b", "hardware=gpu_a100",
                               "plan.split=[8x1x1]", f"plan.global_batch={batch}")
    # Rule: exit 0, "no configuration fits", the closest with what it lacks (here the
    # global batch, with the nearest that divides), and plan.md written saying the same.
    assert code == 0, printed
    assert rows and not any(r["fits"] == "True" for r in rows)
    assert "No configuration fits. The closest, and what each lacks:" in printed
    assert (f"global batch {batch} is not divisible by 1 micro-batches x dp 8 (the nearest "
            "that is: 8)") in printed
    md = (out / "plan.md").read_text()
    assert "## No configuration fits" in md and "the nearest that is: 8" in md
    assert {"plan.csv", "plan.md", "plan.png", "breakdown.png"} <= {p.name for p in out.iterdir()}


def test_nothing_fits_in_memory_lists_the_closest_with_the_memory_each_lacks(tmp_path, capsys):
    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, "workload=llama2_70b", "hardware=gpu_a100",
                               "plan.split=[8x1x1]", "plan.recompute=[none]",
                               "plan.precisions=[fp16]")
    assert code == 0, printed
    assert not any(r["fits"] == "True" for r in rows)
    # Rule: the closest is the one with the least predicted memory, and what it lacks is
    # its optimistic peak (the end the memory rule applies) less the 80 GiB budget.
    least = min(float(r["peak_gib"]) for r in rows)
    short = least * (1 - HELD_OUT_MEMORY_ERROR) - 80
    table = printed.split("what each lacks:")[1]
    first = table.splitlines()[2]
    assert f"{short:,.1f} GiB of memory: needs at least {least * 0.91:,.1f} GiB" in first
    assert "## No configuration fits" in (out / "plan.md").read_text()


def test_a_bare_split_is_the_same_plan_as_one_in_brackets(tmp_path, capsys):
    bare, listed = tmp_path / "bare", tmp_path / "listed"
    code, printed, rows = plan(capsys, bare, "workload=llama2_7b", "hardware=gpu_a100",
                               "plan.split=2x4x1", "plan.global_batch=64")
    assert code == 0, printed
    _, _, same = plan(capsys, listed, "workload=llama2_7b", "hardware=gpu_a100",
                      "plan.split=[2x4x1]", "plan.global_batch=64")
    # Rule: plan.split=2x4x1 plans exactly what plan.split=[2x4x1] plans.
    assert {r["split"] for r in rows} == {"2x4x1"} and rows == same


def test_bloom_70_layers_on_12_stages_is_planned_and_flagged_uneven(tmp_path, capsys):
    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, *BLOOM, "plan.split=8x4x12",
                               "plan.recompute=[full]", "plan.precisions=[bf16]")
    assert code == 0, printed
    # Rule: layers that do not divide by the stages are not a reason to rule a split out:
    # BLOOM's own run was 8x4x12. Each planned point says how its stages split (2 of 5
    # layers, 10 of 6: memory.stage_layer_counts), on the terminal too.
    assert not any("not divisible by parallel.pp" in r["reason"] for r in rows)
    predicted = [r for r in rows if r["peak_gib"]]
    assert predicted and all(r["flags"] == "uneven stages 2x5 + 10x6 layers"
                             for r in predicted)
    assert any(r["fits"] == "True" for r in rows)
    assert "uneven stages 2x5 + 10x6 layers" in printed


def test_tensor_parallel_over_two_nodes_is_planned_flagged_and_pays_the_inter_node_link(
        tmp_path, capsys):
    slow, fast = tmp_path / "slow", tmp_path / "fast"
    pinned = ["plan.split=[8x16x3]", "plan.recompute=[full]", "plan.precisions=[bf16]",
              "plan.micro_batches=[128]", "plan.sequence_parallel=[false]",
              "plan.optimizer_shard=[true]"]
    code, printed, rows = plan(capsys, slow, *BLOOM, *pinned)
    assert code == 0, printed
    # Rule: t = 16 on nodes of 8 is planned, flagged, not ruled out as "would span nodes".
    assert len(rows) == 1 and rows[0]["fits"] == "True", rows
    assert "t=16 spans 2 nodes" in rows[0]["flags"] and "t=16 spans 2 nodes" in printed
    # Rule: its collectives cross the inter-node link: as fast as NVLink, they cost less.
    _, _, nvlink = plan(capsys, fast, *BLOOM, *pinned,
                        "hardware.inter_node.bandwidth_gbs=300")
    assert float(nvlink[0]["time_mp_collectives_s"]) < 0.7 * float(
        rows[0]["time_mp_collectives_s"])


def test_the_terminal_table_has_step_time_and_mfu(tmp_path, capsys):
    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, "workload=llama2_7b", "hardware=gpu_a100",
                               "plan.split=[8x1x1,2x4x1]", "plan.global_batch=64",
                               "plan.precisions=[bf16]")
    assert code == 0, printed
    header = next(line for line in printed.splitlines() if line.strip().startswith("rank"))
    assert "step s" in header and "MFU %" in header
    best = next(r for r in rows if r["rank"] == "1")
    first = printed.splitlines()[printed.splitlines().index(header) + 1]
    # Rule: the best row shows plan.csv's step time and MFU (as a percentage).
    assert f"{float(best['step_s']):,.2f}" in first.split()
    assert f"{100 * float(best['mfu']):,.2f}" in first.split()


def test_the_memory_interval_printed_is_the_one_applied(tmp_path, capsys):
    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, "workload=llama2_7b", "hardware=gpu_a100")
    assert code == 0, printed
    said = [float(x) for x in re.findall(r"memory \+-(\d+(?:\.\d+)?) %", printed)]
    md = [float(x) for x in re.findall(r"memory \+-(\d+(?:\.\d+)?) %",
                                       (out / "plan.md").read_text())]
    # Rule: one number, stated on the terminal and in plan.md, and the one the rule
    # applies: ruled out exactly when peak x (1 - it) > budget, tight when peak x (1 + it)
    # > budget, whatever the constants' own memory_uncertainty (0.3 for the priors).
    assert said == md == [100 * memory_interval()] == [100 * HELD_OUT_MEMORY_ERROR]
    half = said[0] / 100
    for r in (r for r in rows if r["peak_gib"]):
        peak = float(r["peak_gib"])
        assert (r["fits"] == "True") == (peak * (1 - half) <= 80), r
        assert (r["tight"] == "True") == (r["fits"] == "True" and peak * (1 + half) > 80), r


def test_a_bf16_plan_from_an_fp16_fit_says_which_constants_are_priors(tmp_path, capsys,
                                                                        cache):
    from autotune.settings import SweepConfig
    from trials.contract.compose import compose
    from trials.contract.schema import to_trial_config

    hw = to_trial_config(compose("sweep", ["hardware=gpu_a100"], schema=SweepConfig)).hardware
    prior = Constants.priors(hw)
    fp16_fit = dataclasses.replace(prior, compute_efficiency={**prior.compute_efficiency,
                                                              "float16": 0.75},
                                   efficiency_dtypes=["float16"], time_uncertainty=0.1,
                                   source="calibrate: fit of 24 fp16 runs")
    calibration.save(hw.name, fp16_fit, cache)
    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, "workload=llama2_7b", "hardware=gpu_a100",
                               "plan.split=[8x1x1]", "plan.global_batch=64",
                               "plan.precisions=[fp16,bf16]")
    assert code == 0, printed
    # Rule: every constant of bf16 the fit did not measure is named; bf16's compute
    # efficiency is fp16's fitted one (the A100's datasheet peak is 312 TFLOP/s for both),
    # so the plan does not invent a 1.5x gap between them.
    assert "constants: calibrate: fit of 24 fp16 runs" in printed
    assert ("bf16 constants: compute efficiency 0.750 is fp16's, fitted (not measured in "
            "bf16: the profile's datasheet peak is 312 TFLOP/s for both)") in printed
    assert "activation factor 1 is the prior (the fit measured no bf16 peak memory)" in printed
    assert "bf16 constants" in (out / "plan.md").read_text()
    df = pd.DataFrame(rows)
    df = df[df["peak_gib"] != ""]
    speed = df.groupby("precision")["tokens_per_s"].apply(lambda s: sorted(map(float, s)))
    assert speed["fp16"] == pytest.approx(speed["bf16"])


def test_fp32_after_an_fp16_fit_keeps_its_prior_and_says_so(tmp_path, capsys, cache):
    from autotune.plan.coverage import dtype_coverage
    from autotune.settings import SweepConfig
    from trials.contract.compose import compose
    from trials.contract.schema import DType, to_trial_config

    hw = to_trial_config(compose("sweep", ["hardware=gpu_a100"], schema=SweepConfig)).hardware
    prior = Constants.priors(hw)
    fit = dataclasses.replace(prior, compute_efficiency={**prior.compute_efficiency,
                                                         "float16": 0.75},
                              efficiency_dtypes=["float16"], activation_dtypes=["float16"],
                              source="fit")
    coverage = dtype_coverage(fit, prior, hw, [DType.float16, DType.float32])
    # Rule: fp32's datasheet peak (19.5) is not fp16's (312): nothing is borrowed, and the
    # prior is named; fp16, measured in both, needs no note.
    fp32_prior = prior.compute_efficiency["float32"]
    assert fp32_prior != 0.75 and coverage.constants.compute_efficiency["float32"] == fp32_prior
    assert coverage.notes == (f"fp32 constants: compute efficiency {fp32_prior:g} is the prior "
                              "(the fit measured fp16 step times); activation factor 1 is the "
                              "prior (the fit measured no fp32 peak memory)",)


def test_ruled_out_points_are_counted_by_reason_and_the_step_time_is_charted(tmp_path, capsys):
    from autotune.plan.figure import PARTS, step_parts

    out = tmp_path / "plan"
    code, printed, rows = plan(capsys, out, "workload=llama2_70b", "hardware=ascend_910b",
                               "plan.nodes=4")
    assert code == 0, printed
    listed = printed.split("by reason:\n")[1].split(" configurations fit;")[0]
    counts = [int(m.replace(",", "")) for m in re.findall(r"^\s+([\d,]+)  ", listed, re.M)]
    ruled_out = sum(r["fits"] == "False" for r in rows)
    # Rule: every ruled-out point is counted under one reason, on the terminal.
    assert f"ruled out ({ruled_out:,}), by reason:" in printed
    assert sum(counts) == ruled_out and len(counts) >= 2
    assert (out / "breakdown.png").stat().st_size > 10_000
    # Rule: the chart's parts (compute without its recompute forward, the recompute
    # forward, each collective, the bubble, ...) add up to the predicted step.
    best = pd.Series(next(r for r in rows if r["rank"] == "1")).replace("", None)
    assert {k for k, _ in PARTS} >= {"compute", "recompute", "mp_collectives", "dp_allreduce",
                                    "pp_bubble", "pp_p2p"}
    assert sum(step_parts(best).values()) == pytest.approx(float(best["step_s"]), rel=1e-9)
