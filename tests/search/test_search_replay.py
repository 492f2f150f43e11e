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
