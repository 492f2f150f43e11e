"""A sweep's refits belong to its study (autotune/plan/fits.py): two studies on one
machine and profile refit independently, and each study's sweep, export and report use its
own fit and name it; a new study starts from the imported ``calibrate`` fit, never from a
fit another study left on the machine; an implausible refit is refused with its reason."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from types import SimpleNamespace

import optuna
import pytest
from rich.console import Console

from autotune.export.job import predicted_headroom
from autotune.plan import calibration, fits, learning
from autotune.plan.calibration import Measurement
from autotune.plan.costmodel import CostModel
from autotune.plan.layout import Cluster, Job
from autotune.plan.model_dims import ModelDims
from autotune.plan.plausible import MAX_ACTIVATION_FACTOR, implausible
from autotune.plan.predict import Constants, predict
from autotune.report import prediction
from autotune.settings import SweepConfig, validate_settings
from autotune.study.records import PREDICTION, load_records
from bench.search_efficiency import Landscape, ReplayRunner, sweep_overrides
from tests.conftest import project_env
from trials.contract.compose import compose
from trials.contract.machine import machine_key
from trials.contract.schema import DType, Mode, to_trial_config


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The tests' cache (its verified CPU peak) copied, so that a fit stored here is ours."""
    import shutil

    path = tmp_path / "cache"
    shutil.copytree(project_env()["AUTOTUNE_CACHE"], path)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(path))
    return path


def replayed_sweep(study: str, seed: int, runs, n_trials: int = 6):
    """The real sweep on recorded CPU runs (bench/search_efficiency.py), refitting."""
    from autotune.sweep import Sweep
    from autotune.sweep_context import SweepContext

    landscape = Landscape()
    overrides = [o for o in sweep_overrides("default", seed, base=landscape.base,
                                            budget_gib=landscape.budget_gib,
                                            n_trials=n_trials, runs=runs)
                 if not o.startswith(("sweep.study=", "sweep.predict.refit="))]
    overrides.append(f"sweep.study={study}")
    composed = compose("sweep", overrides, with_choices=True, schema=SweepConfig)
    config = validate_settings(composed)
    out = io.StringIO()
    context = SweepContext.build(composed, config, overrides, measured=True,
                                 runner=ReplayRunner(landscape, seed, 0.0,
                                                     landscape.budget_gib))
    sweep = Sweep(context, Console(file=out, width=200))
    return sweep, sweep.run().study, out.getvalue()


def test_two_studies_on_one_machine_refit_independently(tmp_path, cache):
    runs = tmp_path / "runs"
    sweep_a, study_a, out_a = replayed_sweep("A", 0, runs)
    fit_a = study_a.user_attrs[fits.STUDY_FIT]
    # Rule: the sweep says which fit it starts from; its refit is named after its study.
    assert "cost model: priors of hardware profile cpu" in out_a
    assert fit_a["constants"]["source"].endswith("of study A")

    _, study_b, _ = replayed_sweep("B", 2, runs)
    fit_b = study_b.user_attrs[fits.STUDY_FIT]
    assert fit_b["constants"]["source"].endswith("of study B")
    assert fit_b["constants"] != fit_a["constants"]
    # Rule: B's refits changed nothing of A's: not its stored fit, not what its commands use.
    study_a = optuna.load_study(study_name="A", storage=f"sqlite:///{runs}/A/study.db")
    assert study_a.user_attrs[fits.STUDY_FIT] == fit_a
    hw = sweep_a.context.base.hardware
    model_a = fits.study_model(study_a, hw)
    assert dataclasses.asdict(model_a.constants) == fit_a["constants"]
    assert dataclasses.asdict(fits.study_model(study_b, hw).constants) == fit_b["constants"]
    # Rule: A's export predicts with A's fit and names it.
    headroom = predicted_headroom(sweep_a.context.base, model_a)
    assert headroom["constants"].endswith("of study A")
    assert headroom["peak_gib"] == model_a.predict_config(sweep_a.context.base).peak_gib
    # Rule: the interval it states is the one the guard applies (a fit's in-sample residual
    # read "+-0 %").
    from autotune.plan.predict import memory_interval

    assert headroom["uncertainty"] == memory_interval() > 0.05
    # Rule: A's resumed sweep starts from A's fit, not B's (B refitted last on this machine).
    resumed, _, out = replayed_sweep("A", 0, runs, n_trials=6)
    assert resumed.context.model.constants.source.endswith("of study A")
    assert f"cost model: {fit_a['constants']['source']}" in out
    # Rule: prediction.md names the fit of each prediction and the study's fit now.
    report = tmp_path / "report"
    report.mkdir()
    prediction.write(load_records(study_a), report, fit=model_a.constants.source)
    text = (report / "prediction.md").read_text()
    assert f"The study's cost model now: {model_a.constants.source}." in text
    assert "of study A" in text and "of study B" not in text


def test_a_new_study_starts_from_the_imported_fit_never_from_a_machines(cache):
    hw = to_trial_config(compose("sweep", [], schema=SweepConfig)).hardware
    prior = Constants.priors(hw)
    # A fit an earlier version stored per machine (shared by every study here) is not read.
    machine = hashlib.sha256(machine_key().encode()).hexdigest()[:12]
    legacy = cache / "calibration" / f"cpu-{machine}.json"
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(json.dumps(calibration.to_record(dataclasses.replace(
        prior, activation_factor={**prior.activation_factor, "float32": 24.3},
        source="fit of 3 measured trial(s)"), "cpu")))
    study = SimpleNamespace(study_name="new", user_attrs={})
    assert fits.study_model(study, hw).constants == prior
    # With an imported calibrate fit, a new study starts from it and its refits say so.
    imported = dataclasses.replace(prior, step_overhead_s=0.02, source="calibrate: fit of 5 runs")
    calibration.save("cpu", imported)
    model = fits.study_model(study, hw)
    assert model.constants == imported and model.start == imported
    study.set_user_attr = study.user_attrs.__setitem__
    kept = fits.keep(study, model, dataclasses.replace(imported, source="fit of 4 measured "
                                                                         "trial(s)"))
    assert kept.source == "fit of 4 measured trial(s) of study new, from calibrate: fit of 5 runs"
    assert fits.study_model(study, hw).constants == kept
    # A record of another profile is never taken for this one's.
    study.user_attrs[fits.STUDY_FIT]["profile"] = "gpu_a100"
    assert fits.study_model(study, hw).constants == imported


def measured_point(hw) -> Measurement:
    cfg = to_trial_config(compose("sweep", ["workload=gpt_tiny"], schema=SweepConfig))
    return Measurement(dims=ModelDims.of(cfg.workload), job=Job.of(cfg), cluster=Cluster(hw),
                       peak_flops_per_device=1e11, peak_gib=0.9, step_s=0.05)


def test_an_implausible_refit_is_refused_and_the_study_keeps_its_fit(cache, monkeypatch):
    hw = to_trial_config(compose("sweep", [], schema=SweepConfig)).hardware
    model = CostModel.for_profile(hw)
    point = measured_point(hw)
    # Implausible on both sides: a compute efficiency under 2 % of the peak, and a float32
    # activation factor of 24.3.
    bent = dataclasses.replace(model.start, activation_factor={
        **model.start.activation_factor, "float32": 24.3},
        compute_efficiency={**model.start.compute_efficiency, "float32": 0.001},
        source="fit of 3 measured trial(s)")
    assert point.job.dtype is DType.float32 and 24.3 > MAX_ACTIVATION_FACTOR
    assert "compute efficiency" in implausible(bent, [point])
    # The sweep's refit of that fit: refused with the reason, nothing stored in the study.
    monkeypatch.setattr(learning, "measurements", lambda records, model, cache: [point])
    monkeypatch.setattr(model, "fitted", lambda points: bent)
    study = SimpleNamespace(study_name="s", user_attrs={},
                            set_user_attr=lambda k, v: pytest.fail("a refused fit was stored"))
    record = SimpleNamespace(number=0, reason=None, attrs={}, peak_memory_gib=0.9,
                             tokens_per_s=None)
    refitter = learning.Refitter(model, 0.1)
    line = refitter.after_trial(study, [record], 0)
    assert line.startswith("cost model: the refit of 1 trial(s) was refused (the fitted "
                           "float32 compute efficiency is 0.10 %")
    # Said once a sweep: the next refusal prints nothing.
    assert "later refusals" in line and refitter.after_trial(study, [record], 0) is None
    assert model.constants is model.start and fits.STUDY_FIT not in study.user_attrs
    # Implausible memory only (the activation factor): its time constants are kept, the
    # memory constants stay as they were, and the line says which.
    stored = {}
    study.set_user_attr = stored.__setitem__
    memory_only = dataclasses.replace(bent, compute_efficiency=model.start.compute_efficiency,
                                      step_overhead_s=0.03)
    monkeypatch.setattr(model, "fitted", lambda points: memory_only)
    line = learning.Refitter(model, 0.1).after_trial(study, [record], 0)
    assert line.startswith("cost model: the memory constants of the refit of 1 trial(s) were "
                           "refused (the fitted float32 activation factor 24.3")
    kept = stored[fits.STUDY_FIT]["constants"]
    assert kept["step_overhead_s"] == 0.03
    assert kept["activation_factor"] == model.start.activation_factor
    assert kept["source"] == ("fit of 3 measured trial(s), its memory constants kept from the "
                              "previous fit of study s")
    # A plausible fit of the same point is kept whole, in the study, named after it.
    stored.clear()
    model.constants = model.start  # a study without a fit refits after any trial
    monkeypatch.setattr(model, "fitted", lambda points: dataclasses.replace(
        memory_only, activation_factor=model.start.activation_factor))
    assert learning.Refitter(model, 0.1).after_trial(study, [record], 0) is None
    assert stored[fits.STUDY_FIT]["constants"]["source"] == "fit of 3 measured trial(s) of study s"


@pytest.mark.parametrize("loaded", [False, True])
def test_a_step_measured_under_load_stays_out_of_the_time_fit(loaded, cache):
    from trials.contract.outcomes import Outcome
    from trials.contract.performance import Performance

    cfg = to_trial_config(compose("sweep", ["workload=gpt_tiny"], schema=SweepConfig))
    model = CostModel.for_profile(cfg.hardware)
    record = SimpleNamespace(  # a TrialRecord's fields that measurement_of reads
        simulated=False, launched=True, number=0, reason=Outcome.OK, contended=loaded,
        peak_memory_gib=0.8, config=lambda: cfg,
        perf=Performance(tokens_per_step=640, tokens_per_s=640 / 0.05, data_wait_share=0.0))
    point = learning.measurement_of(record, model)
    # Rule: a trial measured under other processes' load keeps its memory in the fit but
    # not its step time (the load set it); a quiet one keeps both.
    assert point.peak_gib == 0.8
    assert point.step_s == (None if loaded else 0.05)


def test_a_trial_stopped_as_slow_teaches_the_time_fit_by_its_measured_steps(cache):
    from trials.contract.outcomes import Outcome
    from trials.contract.performance import Performance

    cfg = to_trial_config(compose("sweep", ["workload=gpt_tiny"], schema=SweepConfig))
    model = CostModel.for_profile(cfg.hardware)

    def slow(step_s, contended=False):
        return SimpleNamespace(  # a TrialRecord's fields that measurement_of reads
            simulated=False, launched=True, number=0, reason=Outcome.SLOW,
            contended=contended, peak_memory_gib=0.7, config=lambda: cfg, attrs={},
            tokens_per_s=None,  # Optuna is told nothing of a pruned trial
            perf=Performance(tokens_per_step=640, tokens_per_s=step_s and 640 / step_s,
                             data_wait_share=0.0))

    # Stopped in its measured steps: their step time enters the time fit, its peak
    # so far does not (the run's peak may have come later).
    point = learning.measurement_of(slow(0.9), model)
    assert point.step_s == 0.9 and point.peak_gib is None
    # Stopped in warm-up (no measured step), or under load: nothing to learn from.
    assert learning.measurement_of(slow(None), model) is None
    assert learning.measurement_of(slow(0.9, contended=True), model) is None
    # A slow trial measured far from its prediction asks for a refit, by its measured
    # tokens/s (Optuna was told none).
    record = slow(0.9)
    record.attrs = {PREDICTION: {"tokens_per_s": 2000.0}}
    assert learning.needs_refit(record, 0.1)
    record.attrs = {PREDICTION: {"tokens_per_s": 640 / 0.9 * 1.05}}
    assert not learning.needs_refit(record, 0.1)


def test_one_pynative_trial_times_pynatives_host_cost_not_the_gemms(cache):
    hw = to_trial_config(compose("sweep", [], schema=SweepConfig)).hardware
    model = CostModel.for_profile(hw)
    graph = measured_point(hw)
    pynative = dataclasses.replace(graph, job=dataclasses.replace(graph.job, mode=Mode.pynative),
                                   step_s=graph.step_s * 4)
    fitted = model.fitted([pynative])
    # Rule: with too few trials for every constant, a PyNative trial's unexplained time
    # goes to PyNative's per-layer latency (a placeholder prior of 0), not to the GEMM
    # efficiency (set by the host's GEMM benchmark): graph mode, which pays no Python
    # dispatch, stays predicted faster than the PyNative trial measured.
    assert fitted.compute_efficiency == model.start.compute_efficiency
    assert fitted.pynative_layer_latency_s > 0

    def step_s(point: Measurement) -> float:
        return predict(point.dims, point.job, point.cluster, fitted,
                       peak_flops_per_device=point.peak_flops_per_device).step_s

    assert step_s(pynative) == pytest.approx(pynative.step_s, rel=1e-6)
    assert step_s(graph) < pynative.step_s / 2
