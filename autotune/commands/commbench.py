"""``python -m autotune commbench``: all-reduce time and bandwidth over msrun at several
message sizes (the measurement itself: autotune/running/commbench.py).

    python -m autotune commbench                               # 2 ranks, 4 KiB .. 64 MiB
    python -m autotune commbench commbench.ranks=8 hardware=ascend_910b

Prints each size as it finishes, then the table (median and p10..p90 milliseconds, algbw
and busbw in GB/s), the peak bus bandwidth beside what the hardware profile assumes for
that many ranks (on a full-mesh profile, ranks - 1 links; each at the share of its line
rate the profile says its library achieves, ``intra_node.achieved_fraction``), and, where
they differ by more than a tenth, the override that plans with the measured figure (the
line rate that achieves it: ``hardware.intra_node.bandwidth_gbs=...``). Writes
``<out>/commbench-<hardware>-<ranks>r.json``
(``commbench.out``, else ``<runs_dir>/commbench``), which ``profile`` reads to judge a
trial's all-reduce."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from omegaconf import DictConfig
from rich.console import Console

from autotune.running.commbench import (
    POLL_S,
    PROGRESS,
    TAIL_LINES,
    TIMEOUT_S,
    assemble,
    bench_argv,
    check,
    out_dir,
    prepare,
    render,
    result_name,
)
from autotune.running.launcher import Process, start, stop
from autotune.settings import CommbenchSettings, SweepConfig, SweepSettings
from trials.contract.schema import to_trial_config


def run_commbench(composed: DictConfig, console: Console, config: SweepConfig) -> int:
    settings: CommbenchSettings = config.commbench
    sweep: SweepSettings = config.sweep
    hw = to_trial_config(composed).hardware
    check(settings, hw)
    out = out_dir(settings, sweep).absolute()  # msrun runs in the log directory
    work = out / "logs" / f"{hw.name}-{settings.ranks}r"
    prepare(out, work)
    n = len(settings.sizes_kib)
    console.print(f"commbench: all-reduce of {n} size{'s' * (n > 1)} on "
                  f"{settings.ranks} ranks ({hw.backend.value}, msrun), {settings.repeats} "
                  f"timed after {settings.warmup} warm-up each; logs: {work}", markup=False,
                  soft_wrap=True)
    started = time.monotonic()
    proc = start(bench_argv(settings, hw.backend, work), work, marker=f"commbench/{os.getpid()}")
    try:
        code = follow(proc, work / "msrun_log", console)
    finally:
        if proc.poll() is None:  # timed out, or Ctrl-C / SIGTERM: msrun workers too
            stop(proc)
    raw = work / "rank0.json"
    if code != 0 or not raw.exists():
        why = (f"timed out after {TIMEOUT_S:g} s" if code is None
               else f"msrun exited {code}" + ("" if code else " without a result"))
        console.print(f"commbench failed: {why}", markup=False)
        console.print(failure_tail(work), markup=False, soft_wrap=True)
        return 1
    result = assemble(json.loads(raw.read_text()), settings, hw, time.monotonic() - started)
    path = out / result_name(hw.name, settings.ranks)
    path.write_text(json.dumps(result, indent=1) + "\n")
    console.print(render(result, hw), markup=False, soft_wrap=True)
    console.print(f"commbench: {path.resolve()}", markup=False, soft_wrap=True)
    return 0


def follow(proc: Process, log_dir: Path, console: Console) -> int | None:
    """Wait for msrun, printing rank 0's progress lines; its exit code, None on timeout."""
    log = log_dir / "worker_0.log"  # msrun's name for rank 0's output
    offset = 0
    while True:
        code = proc.poll()
        offset = show_progress(log, offset, console)
        if code is not None:
            return code
        if time.monotonic() - proc.started > TIMEOUT_S:
            return None
        time.sleep(POLL_S)


def show_progress(log: Path, offset: int, console: Console) -> int:
    """Print the complete progress lines after ``offset``; the new offset."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return offset
    done = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
    for line in chunk[:done].decode(errors="replace").splitlines():
        if line.startswith(PROGRESS):
            console.print(f"  {line[len(PROGRESS):].strip()}", markup=False)
    return offset + done


def failure_tail(work: Path) -> str:
    """The last lines of every worker's log and the scheduler's (which names a worker
    that died), MindSpore's INFO chatter left out; msrun's own output when no worker
    started."""
    msrun_log = work / "msrun_log"
    logs = sorted(msrun_log.glob("worker_*.log"))
    logs = ([*logs, msrun_log / "scheduler.log"] if logs
            else [work / "stderr.log", work / "stdout.log"])
    parts = []
    for log in logs:
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            continue
        lines = [ln for ln in lines if ln.strip() and not ln.startswith("[INFO]")]
        parts.append(f"--- {log} (last {min(TAIL_LINES, len(lines))} lines)")
        parts.extend(lines[-TAIL_LINES:])
    return "\n".join(parts) or f"no log under {work}"


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_commbench(composed, console, config)
