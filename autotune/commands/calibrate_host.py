"""``python -m autotune calibrate-host``: measure this machine's CPU peak FLOP/s again.

    python -m autotune calibrate-host                 # the peak of the precision in use (fp32)
    python -m autotune calibrate-host precision=fp16  # of another precision

MFU on the CPU divides by a peak measured by a GEMM (trials/calibrate.py). This
re-measures it on demand, by the same rule a trial uses but waiting longer for a quiet
host: the figure is stored only when other processes used at most 10 % of the cores
and the fastest repeats agree within 3 %. It prints each figure, its spread, the load
during it and where it was stored; it exits 1, with one line, when the host stayed
loaded (nothing is then stored, and MFU stays not available until a quiet measurement).

The measurement runs as a child process of the trial side (``python -m
trials.calibrate``): the orchestrator never imports MindSpore.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from omegaconf import DictConfig
from rich.console import Console

from autotune.settings import SweepConfig
from trials.contract.launch import trial_env
from trials.contract.machine import default_cache_dir, machine_key
from trials.contract.schema import Backend, ConfigError, to_trial_config

#: Up to 5 attempts of up to 5 s, 2 s apart, after MindSpore's import: a minute at most.
TIMEOUT_S = 600.0


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    cfg = to_trial_config(composed)
    if cfg.hardware.backend is not Backend.CPU:
        raise ConfigError(f"calibrate-host measures this machine's CPU; hardware="
                          f"{cfg.hardware.name} states its peak in hardware.peak_tflops: "
                          "choose hardware=cpu")
    cache = Path(cfg.data.cache_dir) if cfg.data.cache_dir else default_cache_dir()
    dtype = cfg.precision.dtype.value
    console.print(f"calibrate-host: {dtype} GEMM peak of {machine_key()} (stored only when "
                  "the host is quiet)", markup=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="autotune-calibrate-") as work:
        out = Path(work) / "result.json"
        argv = [sys.executable, "-m", "trials.calibrate", "--dtype", dtype,
                "--cache-dir", str(cache), "--out", str(out)]
        try:
            proc = subprocess.run(argv, cwd=work, env=trial_env(os.environ), text=True,
                                  capture_output=True, timeout=TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            console.print(f"calibrate-host: the measurement took over {TIMEOUT_S:g} s; "
                          "nothing stored", markup=False)
            return 1
        if not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            console.print(f"calibrate-host: the measurement failed (exit {proc.returncode}): "
                          f"{tail[0]}", markup=False, soft_wrap=True)
            return 1
        results = json.loads(out.read_text())["results"]
    return show(results, console)


def show(results: list[dict], console: Console) -> int:
    """Print what was measured; 1 (one line for the refusals) when the host stayed loaded."""
    refused = []
    for r in results:
        if "error" in r:
            console.print(f"{r['dtype']}: not measured: {r['error']}", markup=False,
                          soft_wrap=True)
            continue
        e = r["entry"]
        if r["refused"]:
            refused.append(f"{r['dtype']} ({e['flops'] / 1e9:.1f} GFLOP/s): {r['refused']}")
            continue
        console.print(f"{r['dtype']}: {e['flops'] / 1e9:.1f} GFLOP/s, spread "
                      f"{100 * e['spread']:.1f} % (fastest of {e['repeats']} repeats, "
                      f"{e['gemm_n']}^3), other load {e['load_cores']:.2f} of {e['cores']} "
                      f"cores, measured {e['measured_at']}; stored in {r['stored']}",
                      markup=False, soft_wrap=True)
    if refused:
        console.print("calibrate-host: not stored: " + "; ".join(refused)
                      + ". Run it again when the host is quiet",
                      markup=False, soft_wrap=True)
        return 1
    return 0
