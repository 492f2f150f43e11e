"""autotune.study.data_bound: a trial is input-bound by its data wait or its pipeline probe."""

from __future__ import annotations

from autotune.study.conditions import Conditions
from autotune.study.data_bound import DATA_WAIT_HIGH, data_bound_evidence
from autotune.study.schema.keys import CONDITIONS
from tests.fakes import rec


def probe(pipe: float, compute: float, train: float) -> dict:
    return {"performance": {"pipeline_samples_per_s": pipe, "compute_samples_per_s": compute,
                            "samples_per_s": train}}


def test_a_data_wait_above_the_threshold_is_data_bound():
    # Rule: data wait over 10 % of the step is evidence, with the share cited.
    text, nums = data_bound_evidence(rec(0, data_wait_share=0.55))
    assert "55.0 %" in text and nums == {"data_wait_share": 0.55}
    # Rule: at or under the threshold, without a probe, it is not.
    assert data_bound_evidence(rec(0, data_wait_share=DATA_WAIT_HIGH)) is None
    assert data_bound_evidence(rec(0)) is None


def test_the_pipeline_probe_says_so_without_data_wait():
    # Rule: the pipeline alone slower than the step alone is data-bound.
    text, nums = data_bound_evidence(rec(0, data_wait_share=0.0, card=probe(50, 100, 48)))
    assert "alone delivers 50 samples/s" in text and nums["pipeline_samples_per_s"] == 50
    # Rule: training far slower (< 0.67 x) than the step alone while the pipeline keeps up
    # means the pipeline's workers take the cores.
    text, _ = data_bound_evidence(rec(0, card=probe(500, 100, 40)))
    assert "competes with the step for the cores" in text
    # Rule: a pipeline that keeps up and training near the step's rate is not data-bound.
    assert data_bound_evidence(rec(0, card=probe(500, 100, 90))) is None


def test_a_run_under_load_is_not_blamed_on_its_pipeline_for_the_cores_the_load_took():
    hog = {CONDITIONS: Conditions(other_cores=1.5, window_s=30.0, contended=True,
                                  contention_cores=0.5).to_dict()}
    # Rule: training far slower than the step alone, measured under load: not evidence.
    assert data_bound_evidence(rec(0, card=probe(500, 100, 40), attrs=hog)) is None
    # Rule: what the run measured of itself still counts: its data wait, and a pipeline
    # that alone delivers less than the step consumes.
    assert data_bound_evidence(rec(0, data_wait_share=0.55, attrs=hog)) is not None
    assert data_bound_evidence(rec(0, card=probe(50, 100, 40), attrs=hog)) is not None
