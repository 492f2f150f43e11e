"""Real MindSpore: adaptive measurement reports its interval, data-parallel ranks agree on
when to stop, and the compile cache serves only the configuration it was built for."""

from __future__ import annotations

import pytest

from tests.conftest import read_events

pytestmark = pytest.mark.slow


def test_an_adaptive_trial_reports_its_interval_and_why_it_stopped(run_trial):
    run = run_trial("run.adaptive=true", "run.warmup_steps=2", "run.measure_steps=6")
    assert run.returncode == 0, run.stderr[-2000:]
    perf = run.summary["performance"]
    phases = [e["phase"] for e in run.of("step")]
    warmup, measured = phases.count("warmup"), phases.count("measure")
    assert 2 <= warmup <= 6 and perf["warmup_steps_used"] == warmup
    assert 6 <= measured <= 24 and perf["measured_steps"] == measured
    assert len(perf["step_times_s"]) == measured
    assert perf["tokens_per_s_low"] <= perf["tokens_per_s"] <= perf["tokens_per_s_high"]
    assert perf["warmup_end"].startswith(("steady after", "cap of"))
    # It stopped because the interval was tight enough, or at the cap, and says which.
    if measured < 24:
        assert perf["measure_stop"].startswith("interval")
        assert perf["interval_half_width"] <= 0.02
    else:
        assert perf["measure_stop"].startswith("step cap 24")


def test_data_parallel_ranks_agree_and_report_their_communication(tmp_path):
    """Two ranks through msrun (the one launch recipe, as the sweep uses it for dp > 1)."""
    import subprocess

    from tests.conftest import project_env
    from trials.contract.launch import trial_argv

    argv = trial_argv(None, world_size=2, log_dir=tmp_path / "msrun_log", overrides=[
        "workload=gpt_tiny", "parallel.dp=2", "run.warmup_steps=1", "run.measure_steps=4",
        "run.max_measure_steps=10", "run.profile_steps=3",
        f"run.metrics_path={tmp_path / 'metrics.jsonl'}"])
    proc = subprocess.run(argv, cwd=tmp_path, env=project_env(), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ranks = [read_events(tmp_path / "metrics.jsonl"),
             read_events(tmp_path / "metrics.rank1.jsonl")]
    phases = [[e["phase"] for e in events if e["event"] == "step"] for events in ranks]
    assert phases[0] == phases[1] and phases[0].count("measure") >= 4
    assert all(events[-1]["outcome"] == "ok" for events in ranks)
    # Every dp > 1 trial times its gradient all-reduce and each rank's step.
    perf = next(e for e in ranks[0] if e["event"] == "summary")["performance"]
    assert 0 < perf["comm_share"] < 1 and perf["comm_s"] > 0
    assert perf["allreduce_bytes"] > 0 and len(perf["rank_step_s"]) == 2
    assert perf["rank_spread"] >= 0
    # ...and a profile of it sees the all-reduce as communication.
    profile = next(e for e in ranks[0] if e["event"] == "profile")
    assert profile["shares"]["communication"] > 0
    assert "AllReduce" in [r["type"] for r in profile["top_ops"]]
    start = next(e for e in ranks[0] if e["event"] == "start")
    assert start["world_size"] == 2 and start["micro_batch_size"] == 4
    # Rule: memory is reported for every rank, gathered by a real collective.
    res = next(e for e in ranks[0] if e["event"] == "summary")["resources"]
    assert len(res["peak_rss_gib_per_rank"]) == 2
    assert res["peak_rss_gib_total"] == pytest.approx(sum(res["peak_rss_gib_per_rank"]))
    # Rule: gradients are averaged across ranks, so both ranks see the same (global) norm
    # although each trains on its own shard of the data.
    steps = [[e for e in events if e["event"] == "step"] for events in ranks]
    assert [e["grad_norm"] for e in steps[1]] == pytest.approx(
        [e["grad_norm"] for e in steps[0]], rel=1e-5)
    assert [e["loss"] for e in steps[1]] != [e["loss"] for e in steps[0]]


def test_the_compile_cache_is_reused_for_the_same_config_and_never_for_another(run_trial,
                                                                              tmp_path):
    # fp16 in graph mode: a step whose state is more than the model's weights (the
    # dynamic loss scale and its counter). A cached graph once read that state as
    # uninitialised memory: a scale of 1e19, every step overflowed and skipped its update.
    cache = f"data.cache_dir={tmp_path / 'cache'}"

    def once(*extra):
        run = run_trial(cache, "precision=fp16", *extra)
        assert run.returncode == 0, run.stderr[-2000:]
        steps = run.of("step")
        assert [(s["loss_scale"], s["updated"]) for s in steps] == [(65536.0, True)] * len(steps)
        return run.of("start")[0]["applied"]["compile_cache"], run.losses

    first, losses = once()
    again, losses_again = once("run.measure_steps=4")  # how long it runs is not in the key
    changed, _ = once("workload.n_layers=1")  # one knob that changes the graph
    assert first["enabled"] and not first["hit"]
    assert again["key"] == first["key"] and again["hit"]
    assert losses_again[:len(losses)] == losses  # the cached graph computes the same thing
    assert changed["key"] != first["key"] and not changed["hit"]  # recompiled
