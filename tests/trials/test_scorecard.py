"""The scorecard's arithmetic on constructed step records."""

from __future__ import annotations

import pytest

from trials.contract.events import Phase, StepRecord
from trials.contract.scorecard import scorecard
from trials.model import palm_flops_per_token


def steps(times, phase="measure", tokens=100, losses=None):
    out = [StepRecord(step=0, phase=Phase.COMPILE, step_s=5.0, tokens=tokens, loss=6.0,
                      grad_norm=1.0, data_wait_s=0.0, peak_rss_gib=1.0)]
    for i, t in enumerate(times):
        out.append(StepRecord(step=i + 1, phase=Phase(phase), step_s=t, tokens=tokens,
                              loss=(losses or [5.0] * len(times))[i], grad_norm=2.0,
                              data_wait_s=t / 4, peak_rss_gib=1.0))
    return out


def test_tokens_per_s_uses_the_mean_of_measured_steps_only():
    card = scorecard(steps([0.1, 0.2, 0.1, 1.0]), flops_per_token=None, peak_flops=None,
                     recompute=False, peak_rss_gib=[1.0], budget_gib=8, spike_factor=8)
    perf = card["performance"]
    # Rule: compile (5 s) is excluded; the mean of 0.1, 0.2, 0.1, 1.0 is 0.35.
    assert perf["tokens_per_s"] == pytest.approx(100 / 0.35)
    assert perf["step_time_median_s"] == pytest.approx(0.15)
    assert perf["compile_s"] == 5.0
    assert perf["data_wait_share"] == pytest.approx(0.25)
    assert "mfu" not in perf


def test_mfu_and_hfu_follow_palm():
    fpt = palm_flops_per_token(non_embedding_params=1000, n_layers=2, n_heads=2, head_dim=4,
                               seq_len=8)
    assert fpt == 6 * 1000 + 12 * 2 * 2 * 4 * 8
    card = scorecard(steps([0.5, 0.5]), flops_per_token=fpt, peak_flops=1e6, recompute=True,
                     peak_rss_gib=[1.0, 2.0], budget_gib=8, spike_factor=8)
    perf = card["performance"]
    assert perf["mfu"] == pytest.approx(200 * fpt / 1e6)
    assert perf["hfu"] == pytest.approx(perf["mfu"] * 8 / 6)  # recompute: one more forward
    assert card["resources"]["peak_rss_gib_total"] == 3.0
    assert card["resources"]["peak_rss_gib_max_rank"] == 2.0


def test_correctness_and_stability_layers():
    card = scorecard(steps([0.1] * 4, losses=[5.0, 4.0, 3.0, 100.0]), flops_per_token=None,
                     peak_flops=None, recompute=False, peak_rss_gib=[], budget_gib=8,
                     spike_factor=8)
    assert card["correctness"]["loss_start"] == 6.0
    assert card["stability"]["loss_spikes"] == 1


def test_mfu_above_one_is_flagged_as_a_bug():
    card = scorecard(steps([0.5, 0.5]), flops_per_token=1e6, peak_flops=1e6, recompute=False,
                     peak_rss_gib=[1.0], budget_gib=8, spike_factor=8)
    assert card["performance"]["mfu"] == pytest.approx(200)
    assert "check the hardware profile" in card["performance"]["mfu_error"]
