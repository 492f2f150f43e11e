"""autotune.export.changes: what the exported job changes against the baseline, what each
change measured alone, and the caveats for production."""

from __future__ import annotations

from autotune.export.changes import caveats, describe_changes
from tests.fakes import rec
from trials.contract.schema import DType, HardwareConfig, ParallelConfig, TrialConfig
from trials.contract.vocabulary import Recompute


def cfg(**train) -> TrialConfig:
    c = TrialConfig(hardware=HardwareConfig(name="cpu"))
    for k, v in train.items():
        setattr(c.train, k, v)
    return c


def test_a_changed_global_batch_asks_for_a_learning_rate_rescale():
    notes = caveats(cfg(global_batch=16), cfg(global_batch=8))
    # Rule: global batch changed -> linear-rule lr factor, and a re-check of convergence.
    assert notes[0].startswith("Global batch changed 8 -> 16") and "lr x 2" in notes[0]
    # Rule: only micro-batches changed (global batch fixed) -> the lr needs no change.
    notes = caveats(cfg(micro_batches=4), cfg())
    assert "the learning rate needs no change" in notes[0]
    # Rule: the hardware profile is always named (re-tune before moving elsewhere).
    assert notes[-1].startswith("Measured on hardware profile `cpu` (CPU)")


def test_split_fp16_and_recompute_each_carry_their_warning():
    job = cfg(recompute=Recompute.full)
    job.parallel = ParallelConfig(dp=2)
    job.precision.dtype = DType.float16
    text = "\n".join(caveats(job, cfg()))
    # Rule: a new split needs re-sharded checkpoints; fp16 names its loss scaling;
    # recompute says HFU exceeds MFU.
    assert "Parallel split changed 1x1x1 -> 2x1x1" in text
    assert "fp16: dynamic loss scaling" in text and "HFU > MFU" in text
    # Rule: without a baseline config only the job's own caveats are given.
    assert not any("changed" in n for n in caveats(job, None))


def test_each_changed_knob_says_what_it_measured_alone():
    base = rec(0, tokens_per_s=100.0, params={"thr": 1, "micro": 1}, role="baseline")
    alone_thr = rec(1, tokens_per_s=150.0, params={"thr": 2, "micro": 1})
    failed_micro = rec(2, "oom", params={"thr": 1, "micro": 2})
    chosen = rec(3, tokens_per_s=200.0, params={"thr": 2, "micro": 2})
    text = describe_changes(chosen, base, cfg(), [base, alone_thr, failed_micro, chosen])
    # Rule: one row per changed knob with its one-knob-at-a-time trial's gain or outcome.
    assert "| `thr` | 1 | 2 | +50.0 % (trial 1) |" in text
    assert "| `micro` | 1 | 2 | oom (trial 2) |" in text
    # Rule: the overall change is the chosen trial against the baseline.
    assert "Overall: 100 -> 200 tokens/s (+100.0 %)" in text
    # Rule: a knob never measured alone says so; a reuse of another trial's result is not
    # a measurement of its own.
    reused = rec(4, tokens_per_s=150.0, params={"thr": 2, "micro": 1}, reused_from=1)
    text = describe_changes(chosen, base, cfg(), [base, reused, chosen])
    assert "| `thr` | 1 | 2 | not measured alone |" in text


def test_no_baseline_or_the_baseline_itself_is_said_plainly():
    base = rec(0, tokens_per_s=100.0, params={"thr": 1})
    # Rule: nothing to compare against, said; the caveats still follow.
    text = describe_changes(base, None, cfg(), [base])
    assert "no baseline trial" in text and "## Caveats" in text
    # Rule: the baseline chosen is the best configuration found.
    assert "The baseline itself is the best" in describe_changes(base, base, cfg(), [base])
