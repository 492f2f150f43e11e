"""The search-efficiency benchmark's in-process replay decides exactly as the real sweep
does when a replay trial program stands in for MindSpore (same proposals, outcomes and
told values), so its trial-second counts are the real loop's."""

from __future__ import annotations

import sys

import pytest
from omegaconf import OmegaConf

from autotune.cli import main
from autotune.settings import SweepConfig
from autotune.study.storage import load_existing
from bench.search_efficiency import (
    Landscape,
    decisions_of,
    search_once,
    sweep_overrides,
)
from trials.contract.compose import compose


# The default searcher: TPE and the slow rule, the most the loop decides; the other
# searchers change only the sampler or turn the rule off.
@pytest.mark.parametrize("searcher", ["default"])
def test_the_in_process_replay_decides_as_the_real_sweep(searcher, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))  # same priors for both
    landscape = Landscape()
    budget = landscape.budget_gib
    # A sweep refits only from trials it knows to be real measurements: the replay does,
    # a trial command does not; the comparison is of the loop, without refits.
    no_refit = ("sweep.predict.refit=false",)
    replayed = search_once(searcher, 3, landscape=landscape, budget_gib=budget, n_trials=6,
                           cv=0.0, workdir=tmp_path / "replay", extra=no_refit)

    overrides = sweep_overrides(searcher, 3, base=landscape.base, budget_gib=budget, n_trials=6,
                                runs=tmp_path / "real", extra=no_refit)
    command = f"sweep.trial_command=[{sys.executable},-m,bench.replay_trial]"
    assert main(["sweep", *overrides, command]) == 0
    settings = OmegaConf.to_object(compose("sweep", [*overrides, command],
                                           schema=SweepConfig).sweep)
    real = decisions_of(load_existing(settings))
    assert real == replayed["decisions"]
    outcomes = {outcome for _, outcome, _ in real}
    assert "ok" in outcomes and len(real) >= 6


def test_a_point_replays_its_median_run_with_each_step_timed_by_the_loops_period(tmp_path):
    import gzip
    import json

    def run(kind, outcome, step_s, period_s):
        """8 tokens a step; the records 'period_s' apart, each step timed 'step_s'."""
        phases = ["compile", "warmup"] + ["measure"] * 4
        steps = [{"step": i, "phase": p, "step_s": 1.0 if i == 0 else step_s,
                  "data_wait_s": 0.0, "peak_rss_gib": 0.1, "loss": 1.0, "tokens": 8,
                  "t_s": 2.0 + i * period_s} for i, p in enumerate(phases)]
        return {"params": {"precision": "fp32"}, "kind": kind, "outcome": outcome, "rc": 0,
                "wall_s": 9.0, "tokens_per_s": 8 / step_s if outcome == "ok" else None,
                "steps": steps}

    path = tmp_path / "landscape.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"search": "x", "space": {"precision": ["fp32"]}, "fixed": [],
                   "budget_gib": 1.0,
                   "runs": [run("grid", "ok", 0.05, 0.10), run("repeat", "diverged", 0.05, 0.10),
                            run("repeat", "ok", 0.04, 0.08)]}, fh)
    landscape = Landscape(path)
    # Rule: a step's time is the loop's period (the time between its record and the one
    # before), what a run recorded with the step alone timed left out: 8 tokens / 0.10 s.
    first = landscape.runs['{"precision": "fp32"}'][0]
    assert first["tokens_per_s"] == pytest.approx(80.0)
    # Rule: a point recorded 3 times replays its median run (a failed run counts as 0
    # tokens/s), and its true value is that run's: 8 / 0.10 s, not the faster 8 / 0.08 s.
    assert landscape.true_value({"precision": "fp32"}, 1.0) == pytest.approx(80.0)
    # Rule: the run-to-run noise pools the point's completed runs: log(100 / 80).
    import math

    assert landscape.run_to_run_cv() == pytest.approx(math.log(100 / 80) / math.sqrt(2))


def test_a_landscape_recorded_elsewhere_replays_from_the_space_it_carries(tmp_path):
    """A landscape whose search space conf/search/ lacks composes from the copy the file
    carries (bench.landscape_record writes one); without a copy it is refused with the
    fix named."""
    import gzip
    import json

    space = {"name": "kept_apart_space", "baseline": {"precision": "fp32"},
             "knobs": {"precision": ["fp32", "fp16"]}}

    def landscape(carried: bool) -> Landscape:
        path = tmp_path / f"landscape-{carried}.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump({"search": "kept_apart_space", "space": space["knobs"],
                       **({"search_config": space} if carried else {}),
                       "fixed": ["data=synthetic"], "budget_gib": 1.0, "runs": []}, fh)
        return Landscape(path)

    composed = compose("sweep", landscape(True).base, schema=SweepConfig)
    assert OmegaConf.to_container(composed.search.knobs) == space["knobs"]
    assert composed.search.name == "kept_apart_space"
    with pytest.raises(ValueError, match="add conf/search/kept_apart_space.yaml"):
        landscape(False).base
