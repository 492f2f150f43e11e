"""A scripted stand-in for the trial program, for orchestrator edge cases.

Called exactly like the real one (``--config config.yaml``), it writes the same
typed records through the same writer (trials/contract/metrics.py) and exits with
the same codes, but trains nothing. What it does is scripted by the
``AUTOTUNE_FAKE`` environment variable (JSON)::

    {"rules": [{"when": {"train.micro_batches": 4}, "do": "oom"}, ...],
     "steps": 6, "step_sleep": 0.02, "slowdown": 1.0}

``slowdown`` multiplies every step time (a machine that got slower); with
``"slowdown_after": N, "counter": PATH`` only processes after the N-th started (counted
in PATH) are slowed: the machine slows down part-way through a sweep. ``jitter`` (a
fraction) makes step times alternate around their value (an imprecise measurement).

``"data_wait": [{"when": {"data.num_workers": 1}, "share": 0.5}]`` makes that share of
each matching trial's step a wait for input data, on top of its compute (a data-bound
configuration: 0.5 halves its tokens/s).
``"unit": "samples"`` records the throughput as samples (a non-token workload).
``"probe": true`` writes probe.json (start, end, CPU affinity, visible devices).
``do`` is one of ok, hang, hang_before_first_step, crash, oom, diverged, slow,
unsupported, config_error, sigkill, sigkill_once, sigkill_at_budget (its peak at 95 % of
the 8 GiB budget first), nan_from_start (non-finite loss from the first step). Throughput
is a deterministic function of the knobs, so tests know which configuration should win:
tokens/s = 1000 x threads / micro_batches, peak memory = 2 GiB / micro_batches.
"""

from __future__ import annotations

import argparse
import json
import os
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

#: The memory budget the fake reports (the CPU profile's default).
BUDGET_GIB = 8.0


def matches(cfg, rule: dict) -> bool:
    return all(str(OmegaConf.select(cfg, key)) == str(value)
               for key, value in rule["when"].items())


def behaviour(cfg, script: dict) -> str:
    return next((rule["do"] for rule in script.get("rules", []) if matches(cfg, rule)), "ok")


def data_wait_share(cfg, script: dict) -> float:
    """The share of each step spent waiting for data: the first matching rule's."""
    return next((float(rule["share"]) for rule in script.get("data_wait", [])
                 if matches(cfg, rule)), 0.0)


def finish(log: MetricsLog, outcome: Outcome, reason: str = "") -> None:
    log.emit(EndRecord(outcome=outcome, reason=reason))
    log.close()
    sys.exit(outcome.exit_code)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args, _ = parser.parse_known_args()
    cfg = OmegaConf.load(args.config)
    script = json.loads(os.environ.get("AUTOTUNE_FAKE", "{}"))
    do = behaviour(cfg, script)
    log = MetricsLog(Path(cfg.run.metrics_path))
    (Path.cwd() / "pid").write_text(str(os.getpid()))
    started = time.time()
    log.emit(StartRecord(world_size=1, budget_gib=BUDGET_GIB, applied={"fake": True, "do": do}))
    if do == "hang_before_first_step":
        time.sleep(3600)
    slowdown = float(script.get("slowdown", 1.0))
    if "slowdown_after" in script:
        with open(script["counter"], "a") as counter:
            counter.write(f"{os.getpid()}\n")
        started_before = len(Path(script["counter"]).read_text().splitlines())
        slowdown = slowdown if started_before > int(script["slowdown_after"]) else 1.0
    threads = int(cfg.runtime.threads) or 2
    tps = 1000.0 * threads / int(cfg.train.micro_batches)
    if do == "slow":
        tps /= 10
    peak = 2.0 / int(cfg.train.micro_batches)  # bigger micro-batches need more memory
    if do == "sigkill_at_budget":
        peak = 0.95 * BUDGET_GIB
    tokens = 256
    wait = data_wait_share(cfg, script)
    n_steps = int(script.get("steps", 6))
    steps = []
    for i in range(n_steps):
        if do == "hang" and i == 2:
            time.sleep(3600)
        if do == "crash" and i == 2:
            raise RuntimeError("scripted crash")
        if do in ("sigkill", "sigkill_at_budget") and i == 2:
            os.kill(os.getpid(), 9)
        # Beside the run directory: a new launch finds its directory emptied.
        once = Path.cwd().with_name(Path.cwd().name + ".killed-once")
        if do == "sigkill_once" and i == 2 and not once.exists():
            once.write_text("")  # the retry then runs to the end
            os.kill(os.getpid(), 9)
        if do == "diverged" and i == 2:
            finish(log, Outcome.DIVERGED, "loss non-finite for 3 consecutive steps")
        if do == "nan_from_start" and i == 3:
            finish(log, Outcome.DIVERGED, "loss non-finite for 3 consecutive steps")
        if do == "oom" and i == 1:
            finish(log, Outcome.OOM, "peak RSS 9.00 GiB over the memory budget 8.00 GiB")
        if do == "unsupported":
            finish(log, Outcome.UNSUPPORTED, "scripted: not on this backend")
        if do == "config_error":
            print("config error: scripted", file=sys.stderr)
            finish(log, Outcome.CONFIG_ERROR, "scripted: the trial rejected its config")
        phase = Phase.COMPILE if i == 0 else (Phase.WARMUP if i == 1 else Phase.MEASURE)
        loss = float("nan") if do == "nan_from_start" else 5.0 - 0.1 * i
        step_s = (tokens / tps * slowdown / (1 - wait)  # the wait comes on top of compute
                  * (1 + float(script.get("jitter", 0.0)) * (-1) ** i))
        step = StepRecord(step=i, phase=phase, loss=loss, grad_norm=1.0, step_s=step_s,
                          data_wait_s=wait * step_s, tokens=tokens, peak_rss_gib=peak)
        steps.append(step)
        log.emit(step)
        time.sleep(float(script.get("step_sleep", 0.02)) * (20 if do == "slow" else 1))
    card = scorecard(steps, flops_per_token=1e6, peak_flops=1e12, recompute=False,
                     peak_rss_gib=[peak], budget_gib=8.0, spike_factor=8.0)
    if script.get("unit"):  # a workload that counts samples, not tokens
        card["performance"]["unit"] = script["unit"]
    log.emit(SummaryRecord(**card))
    if script.get("probe"):  # where and when it ran (concurrent-trial tests)
        (Path.cwd() / "probe.json").write_text(json.dumps({
            "start": started, "end": time.time(), "affinity": sorted(os.sched_getaffinity(0)),
            "visible": {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES",
                                                   "ASCEND_RT_VISIBLE_DEVICES")
                        if k in os.environ}}))
    finish(log, Outcome.OK)


if __name__ == "__main__":
    main()
