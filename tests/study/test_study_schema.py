"""The study schema: every blob round-trips through its JSON with a version, reads what
older writers wrote, and the layout owns the storage URL."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune.study import schema
from autotune.study.layout import StudyLayout, sqlite_path, sqlite_url, study_url
from autotune.study.schema import (
    blob,
    confirm,
    fingerprint,
    fit,
    keys,
    prediction,
    profile,
    published,
    repeats,
    scorecard,
    soak,
    stages,
    worker,
)
from autotune.study.schema.blob import VERSION_KEY, Blob
from autotune.study.schema.soak import Kill, Launch, ResumeCheck, SoakAnalysis, SoakFlags
from autotune.study.schema.stages import (
    BaselineCurve,
    CorrectnessResult,
    DataResult,
    MemoryResult,
    PrecisionCheck,
    stage_results,
)
from trials.contract.breakdown import MemoryCurve, MemoryStats, OpRow
from trials.contract.events import ProfileRecord
from trials.contract.performance import Performance

EXAMPLES = [
    schema.ConfirmVerdict(tokens_per_s=[1.0, 2.0], median=1.5, min=1.0, max=2.0, cv=0.3,
                          vs_baseline=schema.PairedTest(ratio=0.1, low=0.0, high=0.2,
                                                        p_value=0.04, rounds=2, real=True,
                                                        text="+10 %"), baseline=0),
    schema.ConfirmRun(id="abc", plan=schema.ConfirmPlan(trials=[0, 3], orders=[[3, 0]]),
                      failed=["confirm/abc/3/0"], finished=True),
    schema.Repeat(performance=Performance(tokens_per_s=5.0, step_times_s=(0.1, 0.2)),
                  source="confirm", at=12.5, run="confirm/abc/3/1"),
    schema.Scorecard(correctness=schema.Correctness(loss_start=5.0, loss_falling=True),
                     performance=Performance(tokens_per_s=3.0),
                     resources=schema.Resources(peak_rss_gib_max_rank=1.5)),
    schema.StoredPrediction(peak_gib=1.0, peak_interval_gib=[0.9, 1.1], constants="priors"),
    schema.ProfileResult(trial=2, dir="/runs/p", profile=ProfileRecord(
        steps=3, step_s=0.1, top_ops=[OpRow(type="MatMul", category="forward", share=0.3)],
        memory=MemoryCurve(peak_mib=2.0, source="host RSS", t_s=[0.0], mib=[2.0],
                           rss=MemoryStats(peak_mib=3.0))),
                         interconnect=schema.Interconnect(fraction=0.5), figure="p.png"),
    schema.SoakVerdict(trial=1, analysis=SoakAnalysis(flags=SoakFlags(leak=True)),
                       resume=ResumeCheck(resume_step=20, verdict="ok"),
                       attempts=[Launch(index=0, killed=True)], leak=True,
                       kill=Kill(after_step=12, checkpoint_step=10, after_s=3.5)),
    schema.StageResult(done=True, lines=["ok"], ruled_out={"precision": {"fp16": "why"}}),
    CorrectnessResult(done=True, steps=8, baseline=BaselineCurve(learns=True, losses=[2.0]),
                      precisions={"fp16": PrecisionCheck(agree=False, max_rel_diff=0.2)}),
    MemoryResult(done=True, fit=3, points=4, budget_gib=8.0, over_examples=[{"a": 1}]),
    DataResult(done=True, data_bound=True, baseline=0, trials=[1, 2]),
    schema.FitRecord(profile="cpu", fitted_at=1.0, constants={"step_overhead_s": 0.01}),
    schema.FingerprintParts(hardware={"name": "cpu"}),
    schema.Worker(host="h", pid=12),
    schema.TrialProcess(host="h", marker="m", pgid=3, slurm_job="77"),
    schema.Published(sha256="abc", artifact_id="id"),
]


#: Every module of the schema package (the first test checks the list is whole).
MODULES = (blob, confirm, fingerprint, fit, keys, prediction, profile, published, repeats,
           scorecard, soak, stages, worker)


def blob_types(value) -> set[type]:
    """The Blob classes of ``value`` and of every blob it holds, however deep."""
    found = {type(value)} if isinstance(value, Blob) else set()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, (list, tuple)):
        children = list(value)
    else:
        children = []
    return found.union(*(blob_types(child) for child in children))


def test_every_blob_the_schema_defines_has_a_round_trip_example():
    package = Path(schema.__file__).parent
    assert {m.__name__.rsplit(".", 1)[1] for m in MODULES} == {
        p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    defined = {cls for module in MODULES for cls in vars(module).values()
               if isinstance(cls, type) and issubclass(cls, Blob) and cls is not Blob
               and cls.__module__ == module.__name__}
    # Rule: a stored blob has an example below (itself or inside another), so its round
    # trip and its reading of older writers are tested; a new blob without one fails here.
    assert defined - set().union(*(blob_types(b) for b in EXAMPLES)) == set()


@pytest.mark.parametrize("blob", EXAMPLES, ids=lambda b: type(b).__name__)
def test_every_blob_round_trips_with_its_version(blob):
    stored = blob.to_json()
    # Rule: what a writer stores carries its format version, and reads back the same.
    assert stored[VERSION_KEY] == type(blob).VERSION
    assert type(blob).from_json(stored) == blob


@pytest.mark.parametrize("cls", sorted({type(b) for b in EXAMPLES}, key=lambda c: c.__name__))
def test_a_blob_reads_nothing_and_unknown_fields_as_its_defaults(cls):
    # Rule: missing fields default, unknown ones are ignored (an older or newer writer).
    assert cls.from_json(None) == cls.from_json({"no_such_field": 1, VERSION_KEY: 99}) == cls()


def test_a_soak_verdict_reads_its_analysis_typed():
    stored = {"trial": 3, "finished": True, "analysis": {
        "memory": {"judged": True, "slope_mib_per_100_steps": 1.5, "leak": False},
        "loss": {"spikes": 2, "spike_steps": [7, 9]}}, "resume": None, "future": 1}
    verdict = schema.SoakVerdict.from_json(stored)
    assert verdict.analysis.memory.slope_mib_per_100_steps == 1.5
    assert verdict.analysis.loss.spike_steps == [7, 9] and verdict.resume is None
    # Rule: the flags and launches an earlier soak stored as plain objects read typed.
    old = schema.SoakVerdict.from_json({"analysis": {"flags": {"leak": True}},
                                        "attempts": [{"index": 0, "killed": True}]})
    assert old.analysis.flags.leak and old.attempts[0].killed
    # Rule: a soak that ended before any analysis reads as having none.
    assert schema.SoakVerdict.from_json({"trial": 3}).analysis is None


def test_a_profile_stored_as_plain_objects_reads_typed():
    stored = {"profile": {"top_ops": [{"type": "Cast", "share": 0.2, "gone": 1}],
                          "memory": {"peak_mib": 9.0, "source": "host RSS", "rss": {}}}}
    p = schema.ProfileResult.from_json(stored).profile
    # Rule: an earlier profile's rows and memory curve (dicts) read as the contract's records.
    assert p.top_ops == [OpRow(type="Cast", share=0.2)]
    assert p.memory.peak_mib == 9.0 and p.memory.rss == MemoryStats()
    # Rule: a profile without memory (an older trial) reads an empty curve.
    assert schema.ProfileResult.from_json({"profile": {}}).profile.memory == MemoryCurve()


def test_each_stage_reads_its_own_result_typed():
    study = SimpleNamespace(user_attrs={"autotune.stages": {
        "correctness": {"done": True, "baseline": {"learns": True},
                        "precisions": {"fp16": {"agree": False, "max_rel_diff": 0.3}}},
        "data": {"done": True, "baseline": 4, "trials": [5]},
        "throughput": {"done": True, "lines": ["ok"]}}})
    stages = stage_results(study)
    # Rule: a stage's own findings (as an earlier tune stored them) read as its result's type.
    assert stages["correctness"].baseline.learns
    assert stages["correctness"].precisions["fp16"].max_rel_diff == 0.3
    assert stages["data"].baseline == 4 and stages["data"].trials == [5]
    assert type(stages["throughput"]) is schema.StageResult


def test_the_layout_owns_the_sqlite_url(tmp_path):
    layout = StudyLayout(tmp_path / "runs" / "s")
    # Rule: one spelling of a study's SQLite URL, and one parser of it.
    assert layout.storage_url == study_url(tmp_path / "runs", "s") == sqlite_url(layout.db)
    assert sqlite_path(layout.storage_url) == layout.db
    assert sqlite_path("postgresql://u@db/s") is None


def test_a_moved_study_finds_its_runs_under_its_new_root(tmp_path):
    layout = StudyLayout(tmp_path / "copy" / "s")
    (layout.root / "trial-0003" / "check-1").mkdir(parents=True)
    # Rule: a run directory recorded under the old root is found under the new one...
    assert layout.relocated("/old/runs/s/trial-0003/check-1") == layout.root / "trial-0003" / \
        "check-1"
    # ... and one that is not there (or not under a directory of the study's name) is not.
    assert layout.relocated("/old/runs/s/trial-0004") is None
    assert layout.relocated(Path("/old/runs/other/trial-0003")) is None


def test_a_missing_study_is_told_to_run_the_sweep_that_creates_it(tmp_path):
    from autotune.settings import SweepSettings
    from autotune.study.storage import open_storage
    from trials.contract.schema import ConfigError

    settings = SweepSettings(study="mine", runs_dir=str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        open_storage(settings, create=False)
    # Rule: the printed sweep names the study (a plain `sweep` creates "default", not
    # "mine"), and the run directory it was asked about.
    assert f"-m autotune sweep sweep.study=mine sweep.runs_dir={tmp_path}`" in str(caught.value)
    assert not (tmp_path / "mine").exists()
