"""trials.profiling: the profiler's files read back into op events, and the Chrome trace."""

from __future__ import annotations

import json
import time

from trials.contract.breakdown import OpEvent, StepWindow
from trials.profiling import RssSampler, read_allocator, read_ops, write_trace


def framework_dir(tmp_path):
    run = tmp_path / "host_1_ascend_ms"
    (run / "FRAMEWORK").mkdir(parents=True)
    return run


def test_read_ops_skips_non_op_lanes_of_the_trace_view(tmp_path):
    run = framework_dir(tmp_path)
    (run / "ASCEND_PROFILER_OUTPUT").mkdir()
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Scope Layer"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "CPU OP"}},
        {"ph": "X", "pid": 1, "name": "Default/network", "ts": 0, "dur": 50},
        {"ph": "X", "pid": 2, "name": "Default/net/MatMul-op3", "ts": 10, "dur": 5},
        {"ph": "B", "pid": 2, "name": "begin-only", "ts": 10},
    ]
    (run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text(json.dumps(events))
    # Rule: only complete ("X") events of op lanes count; cell scopes (pid 1) are not ops;
    # the op type is the scope's leaf without its -opN suffix.
    assert read_ops(tmp_path, 0) == [OpEvent("Default/net/MatMul-op3", "MatMul", 10.0, 5.0)]


def test_read_ops_falls_back_to_the_cpu_timestamps_and_allocator_is_read(tmp_path):
    run = framework_dir(tmp_path)
    (run / "FRAMEWORK" / "cpu_op_execute_timestamp_0.txt").write_text(
        "Default/Add-op1;Add;1000,0.002 3000,0.001\n")
    (run / "FRAMEWORK" / "cpu_ms_memory_record_0.txt").write_text(
        "timestamp,allocated\n2000,1048576\nbad,line\n")
    # Rule: without a trace view, the CPU timestamp file: ns start -> us, ms duration -> us.
    ops = read_ops(tmp_path, 0)
    assert [(o.type, o.start_us, o.dur_us) for o in ops] == [("Add", 1.0, 2.0), ("Add", 3.0, 1.0)]
    # Rule: the allocator record is (ns -> us, bytes -> MiB), the header and junk skipped;
    # another rank's files are not read.
    assert read_allocator(tmp_path, 0) == [(2.0, 1.0)]
    assert read_ops(tmp_path, 1) == [] and read_allocator(tmp_path, 1) == []


def test_write_trace_has_steps_data_waits_ops_and_counters(tmp_path):
    path = tmp_path / "trace.json"
    op = OpEvent("Default/MatMul-op1", "MatMul", 5.0, 2.0)
    write_trace(path, [op], [StepWindow(0.0, 10.0, 3.0), StepWindow(10.0, 20.0, 0.0)],
                {"rss": [(1.0, 12.3456)]}, rank=3)
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events if e["ph"] == "X"]
    # Rule: one span per step, a data-wait span only where the step waited, one per op.
    assert names == ["step 0", "data wait", "step 1", "MatMul"]
    # Rule: counters carry MiB rounded to 3 places; every event is on the rank's pid.
    assert [e["args"] for e in events if e["ph"] == "C"] == [{"MiB": 12.346}]
    assert {e["pid"] for e in events} == {3}


def test_rss_sampler_samples_until_stopped():
    sampler = RssSampler()
    sampler.start()
    time.sleep(0.05)
    sampler.stop()
    n = len(sampler.samples)
    # Rule: it samples every few ms while running, positive MiB, and stops when told.
    assert n >= 3 and all(mib > 0 for _, mib in sampler.samples)
    time.sleep(0.02)
    assert len(sampler.samples) == n and not sampler.is_alive()
