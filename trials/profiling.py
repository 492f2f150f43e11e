"""A few steps under ``mindspore.profiler``, turned into where the time goes.

The trainer calls this after its measured steps, so the profiler's own cost never
enters a measured number. It writes, under ``run.profile_dir``:

* ``raw/``: the profiler's own output (``*_ascend_ms``; opens in MindStudio Insight);
* ``trace.json``: a Chrome-trace/Perfetto file with the ops (one lane per category),
  the steps, their data wait and the memory curves as counters;

and returns the analysis (:mod:`trials.contract.breakdown`) for the ``profile`` event.
Memory: MindSpore's allocator record where the profiler writes one (the device on
GPU/Ascend, the host memory pool on CPU) and host RSS sampled every few milliseconds
by a thread, always.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

from trials.contract import breakdown as B

#: How often the RSS sampler reads /proc (seconds): fine enough to see a step's sawtooth.
RSS_INTERVAL_S = 0.002
_PAGE = 4096


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


class RssSampler(threading.Thread):
    """Host RSS every RSS_INTERVAL_S until stopped: (epoch microseconds, MiB) pairs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.time_ns() / 1e3, _rss_mib()))
            self._done.wait(RSS_INTERVAL_S)

    def stop(self) -> None:
        self._done.set()
        self.join()


class StepProfiler:
    """``with StepProfiler(dir, n, rank) as p: ...; p.step_done(window)`` per step."""

    def __init__(self, out_dir: Path, steps: int, rank: int, device_target: str) -> None:
        self.out_dir, self.steps, self.rank = Path(out_dir), steps, rank
        self.device_target = device_target
        self.windows: list[B.StepWindow] = []
        self.rss = RssSampler()
        self._prof = None

    def __enter__(self) -> StepProfiler:
        from mindspore.profiler import (
            ProfilerActivity,
            profile,
            schedule,
            tensorboard_trace_handler,
        )

        activities = [ProfilerActivity.CPU]
        if self.device_target == "GPU":
            activities.append(ProfilerActivity.GPU)
        elif self.device_target == "Ascend":
            activities.append(ProfilerActivity.NPU)
        self.raw_dir = self.out_dir / "raw"
        self._prof = profile(activities=activities, profile_memory=True,
                             schedule=schedule(wait=0, warmup=0, active=self.steps, repeat=1,
                                               skip_first=0),
                             on_trace_ready=tensorboard_trace_handler(str(self.raw_dir)))
        self._prof.__enter__()
        self.rss.start()
        return self

    def step_done(self, window: B.StepWindow) -> None:
        self.windows.append(window)
        self._prof.step()

    def __exit__(self, *exc) -> None:
        self.rss.stop()
        self._prof.__exit__(*exc)  # stops and parses (about a second)

    # -- analysis ---------------------------------------------------------------------------
    def analyse(self) -> dict:
        ops = read_ops(self.raw_dir, self.rank)
        split = B.split_steps(ops, self.windows)
        t0 = self.windows[0].start_us
        end = self.windows[-1].end_us
        rss = [(t, v) for t, v in self.rss.samples if t0 <= t <= end]
        allocated = [(t, v) for t, v in read_allocator(self.raw_dir, self.rank) if t0 <= t <= end]
        curve, source = (allocated, "MindSpore allocator") if allocated else (rss, "host RSS")
        t_s, mib = B.downsample([(t - t0) / 1e6 for t, _ in curve], [v for _, v in curve])
        trace = self.out_dir / "trace.json"
        write_trace(trace, ops, self.windows, {"host RSS (MiB)": rss,
                                               "allocated (MiB)": allocated}, self.rank)
        return {"steps": len(self.windows), **split,
                "top_ops": B.top_ops(ops, self.windows),
                "memory": B.MemoryCurve(
                    **dataclasses.asdict(B.memory_stats([v for _, v in curve],
                                                        [t for t, _ in curve])),
                    source=source, t_s=t_s, mib=mib,
                    rss=B.memory_stats([v for _, v in rss], [t for t, _ in rss])),
                "ops_seen": len(ops), "trace": str(trace), "raw_dir": str(self.raw_dir)}


def _framework_dirs(raw_dir: Path) -> list[Path]:
    return sorted(raw_dir.glob("*_ascend_ms"), key=lambda p: p.stat().st_mtime)


#: Processes of the profiler's trace that are not op executions: the cell-scope spans
#: ("Scope Layer") and host-side lanes.
NOT_OPS = ("Scope", "Python", "CANN", "Overlap", "Step", "Memory")


def read_ops(raw_dir: Path, rank: int) -> list[B.OpEvent]:
    """Op executions from the profiler's ``trace_view.json`` (any backend), or from the
    CPU op timestamp file where no trace was written."""
    ops: list[B.OpEvent] = []
    for run in _framework_dirs(raw_dir)[-1:]:
        trace = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        if trace.is_file():
            events = json.loads(trace.read_text())
            skip = {e.get("pid") for e in events if e.get("ph") == "M"
                    and e.get("name") == "process_name"
                    and str(e.get("args", {}).get("name", "")).startswith(NOT_OPS)}
            for e in events:
                if e.get("ph") == "X" and "dur" in e and e.get("pid") not in skip:
                    name = str(e.get("name", ""))
                    ops.append(B.OpEvent(name, B.op_type_of(name), float(e["ts"]),
                                         float(e["dur"])))
            continue
        stamps = run / "FRAMEWORK" / f"cpu_op_execute_timestamp_{rank}.txt"
        for line in stamps.read_text().splitlines() if stamps.is_file() else []:
            name, _, runs = line.split(";", 2)
            for item in runs.split():
                start_ns, dur_ms = item.split(",")[:2]
                ops.append(B.OpEvent(name, B.op_type_of(name), int(start_ns) / 1e3,
                                     float(dur_ms) * 1e3))
    return ops


def read_allocator(raw_dir: Path, rank: int) -> list[tuple[float, float]]:
    """(epoch microseconds, allocated MiB) from the framework's memory record, if any."""
    out = []
    for run in _framework_dirs(raw_dir)[-1:]:
        record = run / "FRAMEWORK" / f"cpu_ms_memory_record_{rank}.txt"
        if not record.is_file():
            continue
        for line in record.read_text().splitlines()[1:]:
            fields = line.split(",")
            if len(fields) >= 2 and fields[0].isdigit():
                out.append((int(fields[0]) / 1e3, int(fields[1]) / 2**20))
    return out


def write_trace(path: Path, ops: list[B.OpEvent], windows: list[B.StepWindow],
                counters: dict[str, list[tuple[float, float]]], rank: int) -> None:
    """A Chrome trace (JSON object format; chrome://tracing, ui.perfetto.dev)."""
    lanes = {c: i for i, c in enumerate(("steps", *B.CATEGORIES[:4]))}
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                           "args": {"name": f"rank {rank}"}}]
    events += [{"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                "args": {"name": lane}} for lane, tid in lanes.items()]
    for i, w in enumerate(windows):
        events.append({"ph": "X", "name": f"step {i}", "cat": "step", "pid": rank, "tid": 0,
                       "ts": w.start_us, "dur": w.dur_us,
                       "args": {"data_wait_ms": w.data_wait_us / 1e3}})
        if w.data_wait_us > 0:
            events.append({"ph": "X", "name": "data wait", "cat": "data_wait", "pid": rank,
                           "tid": 0, "ts": w.start_us, "dur": w.data_wait_us})
    for op in ops:
        cat = B.category(op)
        events.append({"ph": "X", "name": op.type, "cat": cat, "pid": rank, "tid": lanes[cat],
                       "ts": op.start_us, "dur": op.dur_us, "args": {"scope": op.name}})
    for name, points in counters.items():
        events += [{"ph": "C", "name": name, "pid": rank, "ts": t, "args": {"MiB": round(v, 3)}}
                   for t, v in points]
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
