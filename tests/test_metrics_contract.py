"""One writer (trials/metrics_log.py), one reader (autotune/metrics_reader.py), one format."""

from __future__ import annotations

import math

from autotune.metrics_reader import MetricsReader
from trials.metrics_log import MetricsLog
from trials.protocol import FORMAT_VERSION, Event, Outcome


def test_reader_sees_exactly_what_the_writer_wrote(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    reader = MetricsReader(path)
    assert reader.read_new() == []  # before the file exists
    log.emit(Event.START, world_size=1)
    log.emit(Event.STEP, step=0, phase="compile", loss=float("nan"), grad_norm=math.inf,
             overflow=True)
    first = reader.read_new()
    assert [e["event"] for e in first] == ["start", "step"]
    assert first[0]["format"] == FORMAT_VERSION
    # Non-finite floats are written as strings, so every line stays valid JSON.
    assert first[1]["loss"] == "nan" and first[1]["grad_norm"] == "inf"
    log.emit(Event.END, outcome=Outcome.OK.value, reason="")
    log.close()
    assert [e["event"] for e in reader.read_new()] == ["end"]
    assert reader.read_new() == []


def test_a_torn_last_line_waits_for_its_newline(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"event":"step","step":0}\n{"event":"st')
    reader = MetricsReader(path)
    assert [e["step"] for e in reader.read_new()] == [0]
    with open(path, "ab") as f:
        f.write(b'ep","step":1}\n')
    assert [e["step"] for e in reader.read_new()] == [1]


def test_exit_codes_round_trip_and_signals_mean_oom():
    for outcome in Outcome:
        assert Outcome.from_exit_code(outcome.exit_code) is outcome
    assert Outcome.from_exit_code(-9) is Outcome.OOM
    assert Outcome.from_exit_code(-11) is Outcome.CRASH
    assert Outcome.from_exit_code(None) is Outcome.CRASH


def test_a_trial_starts_its_file_afresh_a_production_run_continues_it(tmp_path):
    path = tmp_path / "metrics.jsonl"
    for append in (False, False, True):
        log = MetricsLog(path, append=append)
        log.emit(Event.END, outcome="ok", reason="")
        log.close()
    assert len(MetricsReader(path).read_new()) == 2
