"""The vTrain landscape loads and maps to the cost model's inputs (bench/cost_model_heldout.py),
and the benchmark's rank correlation is Spearman's."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from autotune.plan.layout import Recompute
from autotune.plan.model_dims import hardware_flops_per_token, total_params
from bench.cost_model_accel import megatron_flops
from bench.cost_model_heldout import MIN_GROUP_ROWS, padded_vocab, spearman, vtrain_rows
from trials.contract.schema import DType


@pytest.fixture(scope="module")
def rows():
    return vtrain_rows()


def test_every_row_maps_to_a_job(rows):
    # The upstream file's 1,440 configurations in 144 (model, GPUs, global batch) groups, all
    # of one node; vtrain_rows raises on a row whose split or micro-batch does not map.
    assert len(rows) == 1440
    groups = Counter(r.group for r in rows)
    assert len(groups) == 144
    assert sum(1 for n in groups.values() if n >= MIN_GROUP_ROWS) == 136
    assert {r.job.devices for r in rows} == {2, 4, 8}
    assert len({r.model for r in rows}) == 8
    assert all(r.job.dtype is DType.float16 and r.job.recompute is Recompute.full
               for r in rows)
    assert all(r.step_s > 0 for r in rows)


def test_first_row_as_published(rows):
    # CSV row 1: 2 GPUs, global 16, micro 8, h 1024, 16 heads, 24 layers, s 1024,
    # t 1, d 1, p 2, 372.160408 ms.
    r = rows[0]
    assert (r.job.dp, r.job.mp, r.job.pp) == (1, 1, 2)
    assert (r.job.global_batch, r.job.micro_batch_size, r.job.micro_batches) == (16, 8, 2)
    assert (r.dims.hidden, r.dims.heads, r.dims.layers, r.dims.seq) == (1024, 16, 24, 1024)
    assert r.step_s == pytest.approx(0.372160408)


def test_megatron_vocabulary_padding():
    # GPT-2's 50,257 tokens padded to a multiple of 128 x t (Megatron's default divisor).
    assert [padded_vocab(50257, t) for t in (1, 2, 4, 8)] == [50304, 50432, 50688, 51200]


def test_parameters_and_flops_of_the_largest_model(rows):
    r = next(r for r in rows if (r.dims.hidden, r.dims.layers, r.job.mp) == (2048, 24, 1))
    h, layers, s, v = 2048, 24, 1024, 50304
    # Per layer 12 h^2 + 13 h (weights, biases, two LayerNorms); embedding V h + s h; the
    # final LayerNorm 2 h; the output layer is tied to the embedding.
    derived = layers * (12 * h**2 + 13 * h) + v * h + s * h + 2 * h
    assert total_params(r.dims) == derived == 1_313_722_368
    # With full recompute the model's FLOPs per step equal Megatron-LM's eq. 3
    # (Narayanan et al. 2021) up to the bias terms eq. 3 leaves out (< 0.1 %).
    step_flops = hardware_flops_per_token(r.dims, recompute="full") * r.job.global_batch * s
    published = megatron_flops(r.job.global_batch, s, layers, h, v)
    assert step_flops / published == pytest.approx(1, abs=1e-3)


def test_spearman():
    # One adjacent swap among four: rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([10, 20, 30], [3, 2, 1]) == pytest.approx(-1.0)
    # Ties share their mean rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
    assert spearman([5, 5, 7], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_the_vtrain_fit_gives_the_derived_layer_latency(rows):
    from autotune.plan import calibration
    from autotune.plan.predict import Constants
    from bench.cost_model_accel import profile
    from bench.cost_model_heldout import vtrain_measurement

    hw = profile("gpu_a100")
    fitted = calibration.fit([vtrain_measurement(r, hw) for r in rows], Constants.priors(hw))
    # The derived numbers (kernels.py, steptime.layer_latency_term_s): a 75 us floor under
    # every GEMM and ~1.2 ms a layer and micro-batch beside it and the memory-bound
    # kernels' bytes (2.4 ms with no floor, 2.7 ms when it carried the bytes too); the
    # data-parallel all-reduce, which vTrain's fp16 runs hide or shrink, is charged at
    # no less than its link's bandwidth (the fit's bound, 1: calibration.py).
    assert fitted.kernel_floor_s == 75e-6
    assert fitted.layer_latency_s == pytest.approx(1.2e-3, rel=0.1)
    assert fitted.dp_collective_efficiency == pytest.approx(1.0)
    assert 0.5 < fitted.compute_efficiency["float16"] <= 0.87


def test_a_setting_the_job_lacks_is_named_not_silently_kept():
    from dataclasses import fields

    from autotune.plan.layout import Job
    from bench.cost_model_adapter import job_of, settings_of

    base = {"dp": 8, "mp": 1, "pp": 1, "global_batch": 64, "micro_batches": 8,
            "dtype": "bfloat16", "recompute": "full"}
    known = {f.name for f in fields(Job)}
    job, lost = job_of({**base, "shard_level": 3, "virtual_stages": 2,
                        "context_parallel": 1, "flash_attention": False})
    # A neutral value (cp 1, no flash attention) is no loss; a real one is named unless the
    # Job has the field.
    assert ("virtual_stages=2" in lost) == ("virtual_stages" not in known)
    assert not any(x.startswith(("context_parallel", "flash_attention")) for x in lost)
    if "shard_level" in known:
        assert job.shard_level == 3 and not any(x.startswith("shard_level") for x in lost)
    else:
        # Without sharding levels the nearest the Job says is optimizer states (level 1).
        assert job.optimizer_shard and "shard_level=3 (as optimizer_shard, level 1)" in lost
    # settings_of is job_of's inverse on the fields the Job has.
    assert job_of(settings_of(job))[0] == job


def test_every_point_is_held_out_once_and_never_in_its_own_fit():
    from bench.cost_model_heldout import Folds

    folds = Folds()
    idx = folds.add([{"hardware": "gpu_a100"}] * 7)
    key = {i: i % 3 for i in idx}
    tasks = [folds.tasks[t] for t in folds.held_out("gpu_a100", idx, key.get)]
    assert sorted(i for t in tasks for i in t["predict"]) == idx
    for t in tasks:
        held = {key[i] for i in t["predict"]}
        assert len(held) == 1 and not held & {key[i] for i in t["fit_on"]}
        assert len(t["fit_on"]) + len(t["predict"]) == len(idx)


def test_every_published_run_maps_and_is_cited():
    import csv

    from bench.published_runs import CSV_PATH, points

    rows = list(csv.DictReader(CSV_PATH.open(encoding="utf-8", newline="")))
    pts = points()  # raises on a row whose split does not multiply to its GPUs
    assert len(pts) == len(rows) > 0
    assert all(r["citation"].strip() for r in rows)
    # Every row that ran has a step time; a published OOM (memory-only) has none.
    assert all((p["step_s"] is None) == p["out_of_memory"] and p["nodes"] >= 1 for p in pts)
    assert all(p["step_s"] > 0 for p in pts if not p["out_of_memory"])


def test_bloom_step_from_its_published_tflops():
    from bench.published_runs import points

    bloom = next(p for p in points() if p["source"] == "BLOOM")
    # Megatron-DeepSpeed's count (Narayanan et al. 2021 eq. 3, with recompute) of one
    # iteration, 2,048 x 2,048 tokens, L 70, h 14,336, V 250,880, at 150 TFLOP/s on 384 GPUs.
    b, s, n_layers, h, v = 2048, 2048, 70, 14336, 250880
    flops = 96 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (16 * n_layers * h))
    assert bloom["step_s"] == pytest.approx(flops / (150e12 * 384))
    assert 100 < bloom["step_s"] < 110


def test_a_runs_own_network_reaches_its_cluster():
    """BLOOM's cluster had four 100 Gb/s links a node of 8 GPUs (Le Scao et al. 2022): its
    rows state the profile value that differs, as ``plan`` takes it, and the adapter
    predicts on that cluster, so what crosses nodes takes longer than on the profile's."""
    from bench.cost_model_adapter import run
    from bench.cost_model_heldout import point_of
    from bench.published_runs import points

    pts = points()
    bloom = next(p for p in pts if p["source"] == "BLOOM")
    assert bloom["hardware_overrides"] == ["hardware.inter_node.bandwidth_gbs=6.25"]
    # Every other source ran on the links its profile states (or does not say otherwise).
    assert {p["source"] for p in pts if p["hardware_overrides"]} == {"BLOOM", "BSP"}
    stated = point_of(bloom["dims"], bloom["settings"], "gpu_a100", bloom["nodes"],
                      bloom["step_s"], hardware_overrides=bloom["hardware_overrides"])
    profile = {**stated, "hardware_overrides": []}
    answer = run({"points": [stated, profile],
                  "tasks": [{"prior": "gpu_a100", "fit_on": None, "predict": [0, 1]}]})
    slow, fast = answer["tasks"][0]["step_s"]
    # dp 8 across 8 nodes and 11 pipeline boundaries each cross the 4x slower link.
    assert slow > 1.03 * fast


def test_a_frameworks_gradient_reduction_reaches_the_job():
    """MindFormers rows state MindSpore's reduction: in the parameters' dtype (fp16 params
    reduce in 16 bits), overlapped with the backward; rows that do not say keep the Job's
    defaults, and the adapter predicts a shorter exposed reduction for the stated one."""
    from bench.cost_model_adapter import job_of, run
    from bench.cost_model_heldout import point_of
    from bench.published_runs import points

    pts = points()
    gpt2 = next(p for p in pts if p["name"].startswith("gpt2_13b 4x8x1 finetune 800T"))
    job, lost = job_of(gpt2["settings"])
    assert (job.reduce_in_fp32, job.overlap_grad_reduce, lost) == (False, True, [])
    bloom = next(p for p in pts if p["source"] == "BLOOM")
    assert "reduce_in_fp32" not in bloom["settings"]
    assert (job_of(bloom["settings"])[0].reduce_in_fp32,
            job_of(bloom["settings"])[0].overlap_grad_reduce) == (True, False)
    stated = point_of(gpt2["dims"], gpt2["settings"], "ascend_910b", gpt2["nodes"],
                      gpt2["step_s"])
    default = {**stated, "job": {k: v for k, v in stated["job"].items()
                                 if k not in ("reduce_in_fp32", "overlap_grad_reduce")}}
    answer = run({"points": [stated, default],
                  "tasks": [{"prior": "ascend_910b", "fit_on": None, "predict": [0, 1]}]})
    hidden, exposed = answer["tasks"][0]["step_s"]
    # dp 4 across four nodes: half the bytes, most of them under the backward.
    assert hidden < 0.8 * exposed


def test_runs_kept_apart_load_from_their_own_csv(tmp_path):
    """``--runs``: a CSV of other runs in the same columns is held out as the committed one
    is; one written before the ``hardware_overrides`` column loads on the profile's links."""
    import csv

    from bench.cost_model_heldout import published_points
    from bench.published_runs import CSV_PATH

    rows = [r for r in csv.DictReader(CSV_PATH.open(encoding="utf-8", newline=""))
            if r["source"] == "BLOOM"]
    columns = [c for c in rows[0] if c != "hardware_overrides"]
    mine = tmp_path / "kept.csv"
    with mine.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerow({**rows[0], "source": "KEPT"})
    pts = published_points(mine)
    kept = [p for p in pts if p["source"] == "KEPT"]
    assert len(kept) == 1 and kept[0]["hardware_overrides"] == []
    assert not any(p["source"] == "BLOOM" for p in pts)  # the committed CSV is not read


def test_runs_that_do_not_load_end_with_one_line(tmp_path, monkeypatch, capsys):
    """``--runs`` with a row whose override does not compose: one line naming the file and
    what is wrong, exit 2, before any fit."""
    import csv
    import sys

    from bench import cost_model_heldout
    from bench.published_runs import CSV_PATH

    rows = list(csv.DictReader(CSV_PATH.open(encoding="utf-8", newline="")))
    bad = tmp_path / "bad.csv"
    with bad.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerow({**rows[0], "hardware_overrides": "hardware.inter_node.bandwith=1"})
    monkeypatch.setattr(sys, "argv", ["cost_model_heldout", "--runs", str(bad)])
    with pytest.raises(SystemExit) as exit_info:
        cost_model_heldout.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "hardware.inter_node.bandwith" in err[0]


def test_runs_without_a_published_peak_print_that_they_have_none(capsys):
    from bench.heldout_tables import print_peaks

    print_peaks({"peak_memory": None, "by_source": {}, "peak_points": []}, "every peak")
    assert capsys.readouterr().out.strip() == "every peak: no published peak among these runs"


def test_memory_only_points_are_scored_on_their_peak_and_never_fitted():
    """torchtitan's Float8 + compile rows (Table 2) and the Qwen3-32B runs check the memory
    terms only: no step fold fits on or scores them, and each is predicted by the fit that
    holds its source out."""
    from bench.cost_model_heldout import build, published_points

    every = published_points()
    pubs = [p for p in every if not p.get("memory_only")]
    checks = [p for p in every if p.get("memory_only")]
    assert len(checks) == 27 and all(p["peak_gib"] or p["out_of_memory"] for p in checks)
    folds, sections = build([], pubs, checks)
    first_check = len(pubs)
    step_tasks = [folds.tasks[t] for parts in sections["published"].values()
                  for ids in parts.values() for t in ids]
    for task in step_tasks:
        assert all(i < first_check for i in task["predict"] + (task["fit_on"] or []))
    for t, p in zip(sections["memory_checks"], checks):
        task = folds.tasks[t]
        assert task["predict"][0] >= first_check
        assert task["fit_on"] and all(pubs[i]["source"] != p["source"] for i in task["fit_on"])


def test_every_published_peak_is_held_out_by_source_with_a_memory_fit():
    """Each published peak is predicted by memory constants fitted to the peaks of the other
    sources alone (fit_peaks), never to its own source's; the step folds fit no peak."""
    from bench import cost_model_adapter as adapter
    from bench.cost_model_heldout import build, published_points

    every = published_points()
    pubs = [p for p in every if not p.get("memory_only")]
    checks = [p for p in every if p.get("memory_only")]
    folds, sections = build([], pubs, checks)
    source = [p["source"] for p in pubs + checks]
    tasks = [folds.tasks[t] for t in sections["memory_held_out"]]
    assert len(tasks) == sum(1 for p in every if p.get("peak_gib"))
    for task in tasks:
        (i,) = task["predict"]
        assert task["fit_peaks"] and task["fit_on"]
        assert all(source[j] != source[i] and folds.points[j]["peak_gib"]
                   for j in task["fit_on"])
    assert not any(t["fit_peaks"] for t in folds.tasks
                   if t not in tasks)
    # The adapter fits memory on the peaks only when the task says so.
    one = tasks[0]
    request = {"points": folds.points, "tasks": [one, {**one, "fit_peaks": False}]}
    with_peaks, without = adapter.run(request)["tasks"]
    prior = adapter.profile(one["prior"]).cost
    assert without["constants"]["allocator_factor"] == prior.allocator_factor
    assert with_peaks["constants"]["allocator_factor"] != prior.allocator_factor


def test_calibrate_small_plan_big_fits_on_one_node_and_predicts_only_many(rows):
    """The protocol users follow (issue 33): the fit sees vTrain's single-node runs and
    nothing else; it predicts every multi-node published run and nothing else; the priors
    column predicts the same runs with no fit. The hidden-size split fits on 1,024 only and
    predicts 2,048 only."""
    from bench.cost_model_heldout import build, published_points

    every = published_points()
    pubs = [p for p in every if not p.get("memory_only")]
    folds, sections = build(rows, pubs, [])
    single = set(range(len(rows)))
    multi = {len(rows) + k for k, p in enumerate(pubs) if p["nodes"] > 1}
    calibrated = [folds.tasks[t] for t in sections["protocol"]["calibrated"]]
    priors = [folds.tasks[t] for t in sections["protocol"]["priors"]]
    assert {i for t in calibrated for i in t["predict"]} == multi
    assert all(set(t["fit_on"]) == single for t in calibrated)
    assert {i for t in priors for i in t["predict"]} == multi
    assert all(t["fit_on"] is None for t in priors)
    # Each task predicts one profile's runs, on that profile's priors.
    for t in calibrated + priors:
        assert {folds.points[i]["hardware"] for i in t["predict"]} == {t["prior"]}
    (split,) = [folds.tasks[t] for t in sections["extrapolation"]["fit_small_test_big"]]
    assert {rows[i].dims.hidden for i in split["fit_on"]} == {1024}
    assert {rows[i].dims.hidden for i in split["predict"]} == {2048}
    assert len(split["fit_on"]) == len(split["predict"]) == 720
