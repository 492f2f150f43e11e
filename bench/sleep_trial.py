"""A sleeping stand-in for the trial program, for ``bench/parallel_utilisation.py``.

Called like the real trial program (``--config config.yaml``), it writes the same typed
records through the same writer (trials/contract/metrics.py) so the sweep counts it as
an ok trial, but it only sleeps: ``AUTOTUNE_SLEEP_BASE`` seconds (default 1.2) x
(1 + log2(devices)/6 + log2(micro_batches)/6), so 1.2-2.4 s, times a seeded jitter of
+-10 % (seed: the configuration and ``AUTOTUNE_SLEEP_SEED``). It writes ``probe.json`` in
its working directory: process creation (exec), start and end time,
``CUDA_VISIBLE_DEVICES`` and the config's ``parallel.devices`` (dp x mp x pp).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omegaconf import OmegaConf  # noqa: E402

from trials.contract.events import (  # noqa: E402
    EndRecord,
    Phase,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.metrics import MetricsLog  # noqa: E402
from trials.contract.outcomes import Outcome  # noqa: E402
from trials.contract.scorecard import scorecard  # noqa: E402

STEPS = 4


def duration_s(devices: int, micro_batches: int, seed: str) -> float:
    base = float(os.environ.get("AUTOTUNE_SLEEP_BASE", "1.2"))
    jitter = random.Random(f"{seed}:{devices}:{micro_batches}").uniform(0.9, 1.1)
    return base * (1 + math.log2(devices) / 6 + math.log2(micro_batches) / 6) * jitter


def process_start() -> float:
    """When this process was created (wall clock), from /proc; its start-up is part of
    the time the trial holds its devices."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError):
        return time.time()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args, _ = parser.parse_known_args()
    started = time.time()
    cfg = OmegaConf.load(args.config)
    devices = 1
    for axis in ("dp", "mp", "pp"):  # parallel.devices = dp x mp x pp
        devices *= int(OmegaConf.select(cfg, f"parallel.{axis}", default=1) or 1)
    micro_batches = int(OmegaConf.select(cfg, "train.micro_batches", default=1) or 1)
    total = duration_s(devices, micro_batches, os.environ.get("AUTOTUNE_SLEEP_SEED", "0"))
    log = MetricsLog(Path(cfg.run.metrics_path))
    log.emit(StartRecord(world_size=devices, applied={"fake": True, "sleep_s": total}))
    tokens = 256
    step_s = total / STEPS
    steps = []
    for i in range(STEPS):
        time.sleep(step_s)
        phase = Phase.COMPILE if i == 0 else (Phase.WARMUP if i == 1 else Phase.MEASURE)
        step = StepRecord(step=i, phase=phase, loss=5.0 - 0.1 * i, grad_norm=1.0,
                          step_s=step_s, data_wait_s=0.0, tokens=tokens, peak_rss_gib=1.0)
        steps.append(step)
        log.emit(step)
    card = scorecard(steps, flops_per_token=1e6, peak_flops=1e12, recompute=False,
                     peak_rss_gib=[1.0], budget_gib=8.0, spike_factor=8.0)
    log.emit(SummaryRecord(**card))
    (Path.cwd() / "probe.json").write_text(json.dumps({
        "exec": process_start(), "start": started, "end": time.time(), "devices": devices,
        "micro_batches": micro_batches, "sleep_s": total,
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
    log.emit(EndRecord(outcome=Outcome.OK))
    log.close()
    sys.exit(Outcome.OK.exit_code)


if __name__ == "__main__":
    main()
