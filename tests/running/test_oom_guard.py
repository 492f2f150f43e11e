"""The honest OOM guard: a point is ruled out only when even the optimistic end of its
predicted memory interval exceeds the budget; one inside the interval is launched, tight."""

from __future__ import annotations

import functools

import pytest

from autotune.plan.layout import Cluster, Job
from autotune.plan.model_dims import ModelDims
from autotune.plan.predict import HELD_OUT_MEMORY_ERROR, Constants, MemoryFit, predict
from autotune.search.filters import PredictedOOM, Proposal, Rejected
from autotune.settings import PredictSettings
from tests.fakes import hardware_profile
from trials.contract.outcomes import Outcome
from trials.contract.schema import Arch, DType

DIMS = ModelDims(arch=Arch.gpt, layers=4, hidden=512, heads=8, kv_heads=8, ffn=2048, seq=256,
                 vocab=8192)


@functools.cache
def prediction():
    hw = hardware_profile()
    return predict(DIMS, Job(dp=1, mp=1, pp=1, global_batch=8, micro_batches=1,
                             dtype=DType.float32), Cluster(hw), Constants.priors(hw),
                   peak_flops_per_device=None)


class FakeModel:
    def predict_config(self, cfg):
        return prediction()


class FakeTrial:
    def __init__(self) -> None:
        self.user_attrs: dict = {}

    def set_user_attr(self, key, value) -> None:
        self.user_attrs[key] = value


def check(budget_gib: float) -> tuple[object, dict]:
    trial = FakeTrial()
    proposal = Proposal(trial, {}, cfg=None, problem=None, is_baseline=False)
    guard = PredictedOOM(FakeModel(), budget_gib, PredictSettings())
    return guard.check(proposal, view=None), trial.user_attrs


def test_the_interval_is_the_held_out_memory_error():
    low, high = prediction().peak_interval_gib
    assert low == pytest.approx(prediction().peak_gib * (1 - HELD_OUT_MEMORY_ERROR))
    assert high == pytest.approx(prediction().peak_gib * (1 + HELD_OUT_MEMORY_ERROR))


def test_a_point_inside_its_interval_is_launched_and_flagged_tight():
    # Budget 5 % under the predicted peak: inside the interval (the error is 9 %).
    verdict, attrs = check(prediction().peak_gib * 0.95)
    # Rule: the optimistic end fits, so the guard launches it and says it is tight.
    assert verdict is None
    assert attrs["memory_fit"] == MemoryFit.TIGHT.value
    assert attrs["prediction"]["peak_interval_gib"] == list(prediction().peak_interval_gib)


def test_a_point_above_its_interval_is_refused():
    verdict, attrs = check(prediction().peak_gib * 0.85)
    # Rule: even the optimistic end (peak x 0.91) is over the budget: ruled out.
    assert isinstance(verdict, Rejected) and verdict.outcome is Outcome.PREDICTED_OOM
    assert attrs["memory_fit"] == MemoryFit.OVER.value


def test_a_point_under_its_interval_fits():
    verdict, attrs = check(prediction().peak_gib * 1.10)
    assert verdict is None and attrs["memory_fit"] == MemoryFit.FITS.value
