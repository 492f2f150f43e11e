"""Every knob value runs for real in MindSpore on the CPU (tiny GPT, a few steps each).

Runs combine knobs to keep the suite short; each asserts that the knob took effect
as MindSpore reports it back (the ``applied`` block of the start event, read from
MindSpore's getters, never from the config: trials/runtime/applied.py) or as its
measured effect shows. A knob's read-back is also compared with the default trial's,
so a knob MindSpore silently dropped (leaving its own default) fails the test.
"""

from __future__ import annotations

import math

import pytest

from tests.conftest import run_trial_in
from trials.contract.outcomes import Outcome

#: Every test here runs real MindSpore trials.
pytestmark = pytest.mark.slow


def applied(run) -> dict:
    return run.of("start")[0]["applied"]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """The trial with no knob set, run once: the read-backs the knob trials differ from."""
    run = run_trial_in(tmp_path_factory.mktemp("default-trial"))
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def assert_reads_back(run, default_run, **expected) -> None:
    got, default = applied(run), applied(default_run)
    # Rule: MindSpore reports each knob back as set...
    assert {knob: got[knob] for knob in expected} == expected
    # ...and unlike the default trial, so a knob that was dropped cannot pass as applied.
    same = {knob: default[knob] for knob in expected if default[knob] == expected[knob]}
    assert not same, f"these read back the same in the default trial: {same}"


def test_default_graph_fp32_text(default_run):
    run = default_run
    a = applied(run)
    assert a["mode"] == "graph" and a["jit_level"] == "O0" and a["dense_compute_dtype"] == "fp32"
    # The defaults as MindSpore holds them: the baseline the knob trials must differ from.
    assert a["memory_optimize_level"] == "O0" and a["recomputed_blocks"] == 0
    assert a["cpu_threads"] is None and a["prefetch_size"] == 16
    assert a["dataset_workers"] == {"GeneratorDataset": 1, "Map": 1}
    assert a["loss_scaler"] is None and a["accumulation_steps"] == 1
    card = run.summary
    perf = card["performance"]
    # Rule: throughput counts MEASURE steps only, compile excluded.
    assert perf["measured_steps"] == 3
    assert perf["compile_s"] > perf["step_time_median_s"]
    # Rule: tokens/s is the measured steps' tokens over their summed time (the step times
    # are stored to the microsecond).
    assert perf["tokens_per_s"] == pytest.approx(
        perf["tokens_per_step"] * len(perf["step_times_s"]) / sum(perf["step_times_s"]),
        rel=1e-4)
    # Rule: MFU by the PaLM formula is a fraction in (0, 1].
    assert 0 < perf["mfu"] <= 1
    assert card["correctness"]["loss_falling"]
    assert card["resources"]["peak_rss_gib_max_rank"] > 0.2


def test_fp16_pynative_accumulation_recompute_o1_threads(run_trial, default_run):
    run = run_trial("precision=fp16", "runtime.mode=pynative", "train.micro_batches=2",
                    "train.recompute=full", "runtime.memory_optimize_level=O1",
                    "runtime.threads=1")
    assert run.returncode == 0, run.stderr[-2000:]
    # jit_level None: in PyNative no step Cell carries a jit config to compile with.
    assert_reads_back(run, default_run, mode="pynative", jit_level=None,
                      dense_compute_dtype="fp16", recomputed_blocks=2,
                      memory_optimize_level="O1", cpu_threads=1,
                      loss_scaler="DynamicLossScaler", accumulation_steps=2)
    steps = run.of("step")
    assert all(s["loss_scale"] == 65536.0 for s in steps)  # no overflow in 4 steps
    assert all(math.isfinite(s["loss"]) for s in steps)
    assert run.of("start")[0]["micro_batch_size"] == 4  # 8 = 4 x 2 x dp 1


def test_graph_jit_o1_dataset_workers_mindrecord(run_trial, default_run, tmp_path):
    cache = tmp_path / "fresh-cache"  # empty: whatever is there afterwards, this trial wrote
    run = run_trial("runtime.jit_level=O1", "data=mindrecord", "data.num_workers=2",
                    "data.prefetch=4", "data.max_bytes=200000", f"data.cache_dir={cache}")
    assert run.returncode == 0, run.stderr[-2000:]
    # MindDataDataset: the op MindSpore's pipeline IR names the MindRecord reader.
    assert_reads_back(run, default_run, jit_level="O1", prefetch_size=4,
                      dataset_workers={"MindDataDataset": 2})
    # Rule: the MindRecord source tokenizes once into the cache, then reads from it.
    written = list(cache.glob("text-*/tokens.mindrecord"))
    assert len(written) == 1 and written[0].stat().st_size > 0


def test_text_source_with_worker_processes(run_trial, default_run):
    run = run_trial("data=text", "data.num_workers=2", "data.multiprocessing=true",
                    "data.max_bytes=300000")
    assert run.returncode == 0, run.stderr[-2000:]
    # The text source and its tokenizing map both run with the workers asked for.
    assert_reads_back(run, default_run, dataset_workers={"GeneratorDataset": 2, "Map": 2})
    # Real text: the byte-level LM starts near ln(256) and learns within a few steps.
    assert run.losses[0] == pytest.approx(math.log(256), abs=0.6)
    # Rule: the data-wait share is the measured steps' wait over their step time.
    measured = [e for e in run.of("step") if e["phase"] == "measure"]
    expected = sum(e["data_wait_s"] for e in measured) / sum(e["step_s"] for e in measured)
    share = run.summary["performance"]["data_wait_share"]
    assert share == pytest.approx(expected) and 0 < share < 1


def test_synthetic_source_without_the_compile_cache(run_trial):
    # run.inject_leak_mib: work the loop does between two steps (it fills 16 MiB after each:
    # 25-35 ms here, about as long as the step itself). Twelve measured steps, so that the
    # work left out would miss by about 40 % while the two end records' emit delays (up to
    # 13 ms under the load of a test beside it) stay within 3 % of the sum.
    run = run_trial("data=synthetic", "run.compile_cache=false", "run.inject_leak_mib=16",
                    "run.measure_steps=12")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.end["outcome"] == "ok"
    # Rule: the compile cache turned off is reported off (its reuse: test_trial_measurement).
    assert applied(run)["compile_cache"] == {"enabled": False}
    # Rule: a step's time is the loop's period, what happens between two steps included:
    # the measured steps' times add up to the wall time between their records.
    steps = run.of("step")
    first = next(i for i, e in enumerate(steps) if e["phase"] == "measure")
    timed = sum(e["step_s"] for e in steps[first:])
    wall = steps[-1]["time"] - steps[first - 1]["time"]
    assert timed == pytest.approx(wall, rel=0.1)


@pytest.mark.parametrize("overrides, needle", [
    (("precision=bf16",), "bf16 is not available on the CPU backend (hardware profile cpu)"),
    (("parallel.mp=2",), "model parallel (parallel.mp=2) is not available on the CPU"),
    (("parallel.pp=2", "train.micro_batches=2"), "pipeline parallel (parallel.pp=2)"),
])
def test_unsupported_on_cpu(run_trial, overrides, needle):
    run = run_trial(*overrides)
    # Rule: a knob the backend lacks is the `unsupported` outcome, not a crash.
    assert run.returncode == Outcome.UNSUPPORTED.exit_code, run.stderr[-2000:]
    assert run.end["outcome"] == "unsupported" and needle in run.end["reason"]


def test_the_profile_decides_capability_and_the_probe_only_confirms(run_trial):
    # A profile that claims bf16 on this CPU is wrong: the MatMul probe says so, naming the fix.
    run = run_trial("precision=bf16", "hardware.supports.bf16=true")
    assert run.returncode == Outcome.CONFIG_ERROR.exit_code, run.stderr[-2000:]
    assert run.end["outcome"] == "config_error"
    assert "hardware.supports.bf16=false" in run.end["reason"]
