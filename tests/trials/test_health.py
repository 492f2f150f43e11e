"""A run whose measured updates were mostly skipped ends diverged, whatever its loss says
(trials/contract/health.py)."""

from __future__ import annotations

import math

from trials.contract.events import Phase, StepRecord
from trials.contract.health import MAX_BLIND_SHARE, unhealthy_updates


def run(flags: list[str]) -> list[StepRecord]:
    """A compile step, then one measured step per flag: "ok", "skip" (overflow: update
    skipped, norm nan) or "inf" (norm overflowed to inf, the update landed)."""
    out = [StepRecord(step=0, phase=Phase.COMPILE, loss=5.0, grad_norm=math.nan, step_s=3.0,
                      data_wait_s=0.0, tokens=8, peak_rss_gib=1.0, overflow=True,
                      updated=False)]
    for i, flag in enumerate(flags, start=1):
        out.append(StepRecord(step=i, phase=Phase.MEASURE, loss=4.0, step_s=0.1,
                              data_wait_s=0.0, tokens=8, peak_rss_gib=1.0,
                              grad_norm={"ok": 1.0, "skip": math.nan, "inf": math.inf}[flag],
                              overflow=flag == "skip", updated=flag != "skip"))
    return out


def test_more_than_half_of_the_measured_updates_skipped_is_unhealthy():
    assert MAX_BLIND_SHARE == 0.5
    # Rule: half blind is still healthy (a loss-scaled run skips an update now and then) ...
    assert unhealthy_updates(run(["ok", "skip"] * 5)) is None
    # ... more than half is not, and the reason carries the counts and the first such step.
    reason = unhealthy_updates(run(["ok"] * 4 + ["skip"] * 6))
    assert reason is not None
    assert reason.startswith("6 of 10 measured steps trained nothing (6 updates skipped, "
                             "6 for non-finite gradients")
    assert "first at step 5" in reason


def test_a_non_finite_gradient_norm_counts_even_where_the_update_landed():
    # Rule: a norm that overflowed to inf clips every gradient to zero: no training either.
    reason = unhealthy_updates(run(["ok", "inf", "inf", "skip"]))
    assert reason is not None and "3 of 4 measured steps" in reason
    assert "1 updates skipped" in reason and "non-finite on 3" in reason


def test_only_measured_steps_count():
    # Rule: the compile step's overflow (the loss scale finding its level) is not judged,
    # and a run that measured nothing is not called unhealthy.
    assert unhealthy_updates(run(["ok"])) is None
    assert unhealthy_updates(run([])) is None
