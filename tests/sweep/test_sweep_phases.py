"""bench/sweep_costs.py splits a sweep's orchestrator time into phases that add up to it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pytest

from bench.sweep_costs import orchestration_phases

T0 = dt.datetime(2026, 12, 1, 10, 0, 0)


@dataclass
class FakeTrial:
    """What orchestration_phases reads of an Optuna FrozenTrial."""

    start_s: float
    end_s: float
    user_attrs: dict = field(default_factory=dict)

    @property
    def datetime_start(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.start_s)

    @property
    def datetime_complete(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.end_s)


def test_phases_split_a_one_at_a_time_sweep():
    # The sweep runs from t=0 to t=20: first ask at 2, two launches of 5 s process time
    # each inside 6 s slots, a reused proposal of 0.5 s, the last tell at 17.
    trials = [FakeTrial(2.0, 8.0, {"launched": True, "wall_s": 5.0}),
              FakeTrial(8.5, 9.0, {"launched": False, "wall_s": 5.0}),  # reused: not a launch
              FakeTrial(11.0, 17.0, {"launched": True, "wall_s": 5.0})]
    finished_at = (T0 + dt.timedelta(seconds=20)).timestamp()
    phases = orchestration_phases(trials, 20.0, finished_at)
    # Start-up runs to the first ask, the tail from the last tell to the exit.
    assert phases["startup_s"] == pytest.approx(2.0)
    assert phases["tail_s"] == pytest.approx(3.0)
    # A launch's slot less its process time is orchestrator time: 1 s each.
    assert phases["in_slot_s"] == pytest.approx(2.0)
    # Gaps between a tell and the next ask: 8 -> 8.5 and 9 -> 11.
    assert phases["between_s"] == pytest.approx(2.5)
    assert phases["not_launched_s"] == pytest.approx(0.5)
    # Per launch: the slots and the gaps over the 2 launches.
    assert phases["per_launch_s"] == pytest.approx(2.25)
    # The phases account for all 10 s of orchestrator time (20 s less 2 x 5 s).
    assert phases["unaccounted_s"] == pytest.approx(0.0, abs=1e-6)
