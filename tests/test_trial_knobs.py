"""Every knob value runs for real in MindSpore on the CPU (tiny GPT, a few steps each).

Runs combine knobs to keep the suite short; each asserts that the knob took effect
as MindSpore reports it back (the ``applied`` block of the start event) or as its
measured effect shows.
"""

from __future__ import annotations

import math

import pytest

from trials.protocol import Outcome


def applied(run) -> dict:
    return run.of("start")[0]["applied"]


def test_default_graph_fp32_text(run_trial):
    run = run_trial()
    assert run.returncode == 0, run.stderr[-2000:]
    a = applied(run)
    assert a["mode"] == "graph" and a["jit_level"] == "O0" and a["dense_compute_dtype"] == "fp32"
    card = run.summary
    perf = card["performance"]
    # Rule: throughput counts MEASURE steps only, compile excluded.
    assert perf["measured_steps"] == 3
    assert perf["compile_s"] > perf["step_time_median_s"]
    assert perf["tokens_per_s"] == pytest.approx(perf["tokens_per_step"] /
                                                 perf["step_time_median_s"])
    # Rule: MFU by the PaLM formula is a fraction in (0, 1].
    assert 0 < perf["mfu"] <= 1
    assert card["correctness"]["loss_falling"]
    assert card["resources"]["peak_rss_gib_max_rank"] > 0.2


def test_fp16_pynative_accumulation_recompute_o1_threads(run_trial):
    run = run_trial("precision=fp16", "runtime.mode=pynative", "train.micro_batches=2",
                    "train.recompute=true", "runtime.memory_optimize_level=O1",
                    "runtime.threads=1")
    assert run.returncode == 0, run.stderr[-2000:]
    a = applied(run)
    assert a["mode"] == "pynative" and a["dense_compute_dtype"] == "fp16"
    assert a["loss_scaler"] == "DynamicLossScaler"
    assert a["accumulation_steps"] == 2 and a["recomputed_blocks"] == 2
    assert a["cpu_threads"] == 1
    steps = run.of("step")
    assert all(s["loss_scale"] == 65536.0 for s in steps)  # no overflow in 4 steps
    assert all(math.isfinite(s["loss"]) for s in steps)
    assert run.of("start")[0]["micro_batch_size"] == 4  # 8 = 4 x 2 x dp 1


def test_graph_jit_o1_dataset_workers_mindrecord(run_trial):
    run = run_trial("runtime.jit_level=O1", "data=mindrecord", "data.num_workers=2",
                    "data.prefetch=4", "data.max_bytes=200000")
    assert run.returncode == 0, run.stderr[-2000:]
    a = applied(run)
    assert a["jit_level"] == "O1" and a["prefetch_size"] == 4 and a["dataset_workers"] == 2
    from tests.conftest import project_env

    cache = project_env()["AUTOTUNE_CACHE"]
    import pathlib

    assert list(pathlib.Path(cache).glob("text-*/tokens.mindrecord"))


def test_text_source_with_worker_processes(run_trial):
    run = run_trial("data=text", "data.num_workers=2", "data.multiprocessing=true",
                    "data.max_bytes=300000")
    assert run.returncode == 0, run.stderr[-2000:]
    # Real text: the byte-level LM starts near ln(256) and learns within a few steps.
    assert run.losses[0] == pytest.approx(math.log(256), abs=0.6)
    assert run.summary["performance"]["data_wait_share"] >= 0


def test_synthetic_source(run_trial):
    run = run_trial("data=synthetic")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.end["outcome"] == "ok"


@pytest.mark.parametrize("overrides, needle", [
    (("precision=bf16",), "bfloat16"),
    (("parallel.mp=2",), "model/pipeline parallel needs Ascend or GPU"),
    (("parallel.pp=2", "train.micro_batches=2"), "CPU backend supports data parallel only"),
])
def test_unsupported_on_cpu(run_trial, overrides, needle):
    run = run_trial(*overrides)
    # Rule: a knob the backend lacks is the `unsupported` outcome, not a crash.
    assert run.returncode == Outcome.UNSUPPORTED.exit_code, run.stderr[-2000:]
    assert run.end["outcome"] == "unsupported" and needle in run.end["reason"]


def test_data_parallel_two_ranks_through_msrun(run_trial, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import ROOT, TINY, TrialRun, project_env

    env = project_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    msrun = Path(sys.executable).with_name("msrun")
    argv = [str(msrun), "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1",
            "--master_port=8231", "--join=True", f"--log_dir={tmp_path / 'logs'}",
            str(ROOT / "trials" / "train.py"), *TINY, "parallel.dp=2"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    run = TrialRun(proc, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    start = run.of("start")[0]
    assert start["world_size"] == 2 and start["micro_batch_size"] == 4
    # Rule: memory is reported for every rank, gathered by a real collective.
    res = run.summary["resources"]
    assert len(res["peak_rss_gib_per_rank"]) == 2
    assert res["peak_rss_gib_total"] == pytest.approx(sum(res["peak_rss_gib_per_rank"]))
    # Rule: gradients are averaged across ranks, so both ranks see the same (global) norm
    # although each trains on its own shard of the data.
    from tests.conftest import read_events

    rank1 = [e for e in read_events(tmp_path / "metrics.rank1.jsonl") if e["event"] == "step"]
    rank0 = run.of("step")
    assert [e["grad_norm"] for e in rank1] == pytest.approx([e["grad_norm"] for e in rank0],
                                                           rel=1e-5)
    assert [e["loss"] for e in rank1] != [e["loss"] for e in rank0]
