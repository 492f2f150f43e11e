"""The contract: one writer, one reader, one format, every field; one outcome enum."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from optuna.trial import TrialState

from trials.contract.breakdown import MemoryCurve, MemoryStats, OpRow
from trials.contract.events import (
    FORMAT_VERSION,
    CheckpointRecord,
    EndRecord,
    Phase,
    ProfileRecord,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.launch import MARKER_ENV
from trials.contract.metrics import RUN_ID, MetricsLog, MetricsReader
from trials.contract.outcomes import MEANINGS, Constraint, Outcome
from trials.contract.schema import TrialConfig
from trials.contract.trial_dir import TrialDir

START = StartRecord(world_size=2, start_step=5, total_steps=13, accumulation=4,
                    micro_batch_size=2, tokens_per_step=1024, flops_per_token=3.5e6,
                    budget_gib=8.0, applied={"mode": "graph", "cpu_threads": 2})
STEP = StepRecord(step=7, phase=Phase.MEASURE, loss=2.5, grad_norm=0.75, step_s=0.125,
                  data_wait_s=0.001, tokens=1024, peak_rss_gib=1.25, clipped=True,
                  overflow=True, updated=False, loss_scale=32768.0)
SUMMARY = SummaryRecord(correctness={"loss_falling": True}, performance={"tokens_per_s": 8192.0},
                        stability={"overflow_steps": 1}, resources={"peak_rss_gib_max_rank": 1.25})
PROFILE = ProfileRecord(steps=3, step_s=0.1, shares={"forward": 1.0},
                        top_ops=[OpRow(type="MatMul", category="forward", calls_per_step=2.0,
                                       ms_per_step=30.0, share=0.3, example="Default/MatMul")],
                        memory=MemoryCurve(peak_mib=12.0, mean_mib=11.0, source="host RSS",
                                           t_s=[0.0, 0.1], mib=[10.0, 12.0],
                                           rss=MemoryStats(peak_mib=20.0, samples=2)))
END = EndRecord(outcome=Outcome.OOM, reason="peak RSS 9.00 GiB over the memory budget")


def test_every_field_of_every_record_survives_the_round_trip(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    reader = MetricsReader(path)
    assert reader.read_new() == []  # before anything is written
    written = [START, STEP, CheckpointRecord(step=8, path="checkpoints/step-8.safetensors"),
               PROFILE, SUMMARY, END]
    for record in written:
        log.emit(record)
    log.close()
    read = reader.read_new()
    # Rule: the reader returns the writer's records, field for field, typed.
    assert read == written
    for got, sent in zip(read, written):
        assert type(got) is type(sent)
        assert dataclasses.asdict(got) == dataclasses.asdict(sent)
    assert reader.read_new() == []
    assert json.loads(path.read_text().splitlines()[0])["format"] == FORMAT_VERSION


def test_non_finite_numbers_travel_as_strings_and_come_back_as_floats(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    log.emit(dataclasses.replace(STEP, loss=math.nan, grad_norm=math.inf, step_s=-math.inf))
    log.close()
    raw = json.loads(path.read_text())
    # Rule: every line is valid JSON (no NaN literals), and the reader restores the floats.
    assert (raw["loss"], raw["grad_norm"], raw["step_s"]) == ("nan", "inf", "-inf")
    (step,) = MetricsReader(path).read_new()
    assert math.isnan(step.loss) and step.grad_norm == math.inf and step.step_s == -math.inf


def test_a_torn_last_line_waits_for_its_newline(tmp_path):
    path = tmp_path / "metrics.jsonl"
    line = json.dumps({"event": "step", **{k: v.value if isinstance(v, Phase) else v
                                            for k, v in dataclasses.asdict(STEP).items()}})
    path.write_text(line + "\n" + line[:20])
    reader = MetricsReader(path)
    assert [r.step for r in reader.read_new()] == [7]
    with open(path, "a") as f:
        f.write(line[20:] + "\n")
    assert [r.step for r in reader.read_new()] == [7]


def test_corrupt_and_unknown_lines_are_skipped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"event": "step", "step": 1}\n'  # a step without its fields
                    '{"event": "gossip"}\nnot json\n[1, 2]\n'
                    '{"event": "end", "outcome": "exploded"}\n')
    (end,) = MetricsReader(path).read_new()
    # Rule: an unknown outcome value is read as a crash, never raised.
    assert end.outcome is Outcome.CRASH


def test_a_trial_starts_its_file_afresh_a_production_run_continues_it(tmp_path):
    path = tmp_path / "metrics.jsonl"
    for append in (False, False, True):
        log = MetricsLog(path, append=append)
        log.emit(EndRecord(outcome=Outcome.OK))
        log.close()
    assert len(MetricsReader(path).read_new()) == 2


def test_a_reader_takes_only_the_lines_of_the_launch_it_follows(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv(MARKER_ENV, "confirm/3/111")
    earlier = MetricsLog(path)  # the run id comes from the launch's environment
    earlier.emit(STEP)
    earlier.emit(END)
    earlier.close()
    monkeypatch.setenv(MARKER_ENV, "confirm/3/222")
    now = MetricsLog(path, append=True)
    now.emit(dataclasses.replace(STEP, step=1))
    now.close()
    monkeypatch.delenv(MARKER_ENV)
    by_hand = MetricsLog(path, append=True)  # started by hand: its lines carry no run id
    by_hand.emit(dataclasses.replace(STEP, step=2))
    by_hand.close()
    # Rule: every line a launch writes carries its run id...
    assert [json.loads(line).get(RUN_ID) for line in path.read_text().splitlines()] == [
        "confirm/3/111", "confirm/3/111", "confirm/3/222", None]
    # ... and a reader following one launch never reads another launch's records (an
    # earlier run's end record would end this one); a line without a run id is taken.
    assert [r.step for r in MetricsReader(path, run_id="confirm/3/222").read_new()] == [1, 2]
    assert len(MetricsReader(path).read_new()) == 4


def test_a_run_directory_is_emptied_for_a_new_run_but_keeps_its_nested_runs(tmp_path):
    run = TrialDir(tmp_path / "trial-0000")
    run.write_config(TrialConfig())
    for name in ("metrics.jsonl", "stdout.log", "msrun_log/worker_0.log", "raw/x/op.csv"):
        (run.path / name).parent.mkdir(parents=True, exist_ok=True)
        (run.path / name).write_text("from an earlier run")
    check = TrialDir(run.path / "check-0")
    check.write_config(TrialConfig())
    (check.path / "metrics.jsonl").write_text("the check's own run")
    run.clear()
    # Rule: only the config stays of what an earlier run left; a nested run is its own.
    assert sorted(p.name for p in run.path.iterdir()) == ["check-0", "config.yaml"]
    assert (check.path / "metrics.jsonl").read_text() == "the check's own run"


def test_exit_codes_round_trip_and_signals_alone_are_crashes():
    trial_outcomes = [o for o in Outcome if MEANINGS[o].exit_code is not None]
    assert [o.exit_code for o in trial_outcomes] == [0, 1, 2, 3, 4, 5]
    for outcome in trial_outcomes:
        assert Outcome.from_exit_code(outcome.exit_code) is outcome
    # Rule: a signal alone is no evidence of memory (kill -9 is anyone's); the follow loop
    # decides oom from evidence (tests/running/test_memory_evidence.py).
    assert Outcome.from_exit_code(-9) is Outcome.CRASH
    assert Outcome.from_exit_code(-6) is Outcome.CRASH
    assert Outcome.from_exit_code(-11) is Outcome.CRASH
    assert Outcome.from_exit_code(None) is Outcome.CRASH
    with pytest.raises(ValueError, match="decided by the orchestrator"):
        _ = Outcome.SLOW.exit_code


def test_every_outcome_carries_a_valid_meaning():
    assert set(MEANINGS) == set(Outcome)
    for outcome in Outcome:
        state = TrialState[outcome.state]  # a real Optuna state name
        assert outcome.label and outcome.colour
        # Rule: only a measured success completes; FAIL carries no constraint.
        assert (state is TrialState.COMPLETE) == (outcome is Outcome.OK)
        if state is TrialState.FAIL:
            assert outcome.meaning.constraint is Constraint.NONE
    assert Outcome.OOM.meaning.constraint is Constraint.MEMORY
    # Lost trials are re-run, so their configuration does not count as evaluated.
    assert {o for o in Outcome if not o.evaluated} == {Outcome.ORPHANED, Outcome.INTERRUPTED,
                                                        Outcome.CONTENDED, Outcome.BUDGET}
    assert {o for o in Outcome if o.is_failure} == {Outcome.CRASH, Outcome.HANG,
                                                     Outcome.TIMEOUT}
