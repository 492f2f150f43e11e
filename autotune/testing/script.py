"""What a scripted trial does: one plan, played by a process or in virtual time.

The script is JSON (the ``AUTOTUNE_FAKE`` environment variable)::

    {"rules": [{"when": {"train.micro_batches": 4}, "do": "oom"}, ...],
     "steps": 6, "step_sleep": 0.02, "slowdown": 1.0}

``slowdown`` multiplies every step time (a machine that got slower); with
``"slowdown_after": N, "counter": PATH`` only runs after the N-th started (counted in
PATH) are slowed: the machine slows down part-way through a sweep; ``"run_drift": f``
(with ``counter``) makes the n-th run's steps 1 + f x n times as long, so that no two
runs record the same step times. ``jitter`` (a
fraction) makes step times alternate around their value (an imprecise measurement).
``"data_wait": [{"when": {"data.num_workers": 1}, "share": 0.5}]`` makes that share of
each matching trial's step a wait for input data, on top of its compute (0.5 halves its
tokens/s). ``"unit": "samples"`` records the throughput as samples. ``"probe": true``
(processes only) writes probe.json: start, end, CPU affinity, visible devices.

``do`` is one of :data:`BEHAVIOURS`. Throughput is a deterministic function of the knobs,
so tests know which configuration should win: tokens/s = 1000 x threads / micro_batches,
peak memory = 2 GiB / micro_batches.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from trials.contract.events import EndRecord, Phase, Record, StartRecord, StepRecord, SummaryRecord
from trials.contract.outcomes import Outcome
from trials.contract.scorecard import scorecard

#: The environment variable that carries the script.
SCRIPT_ENV = "AUTOTUNE_FAKE"
#: The memory budget the fake reports (the CPU profile's default).
BUDGET_GIB = 8.0
#: What a rule's ``do`` may say.
BEHAVIOURS = ("ok", "hang", "hang_before_first_step", "crash", "oom", "diverged", "slow",
              "unsupported", "config_error", "sigkill", "sigkill_once", "sigkill_at_budget",
              "nan_from_start")
#: Where a trial that crashes, hangs or is killed does so.
FAULT_STEP = 2
#: The exit code of a process killed by SIGKILL, as ``Popen.returncode`` reports it.
SIGKILLED = -9
#: What Python prints when the scripted crash raises.
CRASH_TRACEBACK = "Traceback (most recent call last):\nRuntimeError: scripted crash"


def read_script(environ: dict | None = None) -> dict:
    return json.loads((os.environ if environ is None else environ).get(SCRIPT_ENV, "{}"))


def matches(cfg: DictConfig, rule: dict) -> bool:
    return all(str(OmegaConf.select(cfg, key)) == str(value)
               for key, value in rule["when"].items())


def behaviour(cfg: DictConfig, script: dict) -> str:
    return next((rule["do"] for rule in script.get("rules", []) if matches(cfg, rule)), "ok")


def data_wait_share(cfg: DictConfig, script: dict) -> float:
    """The share of each step spent waiting for data: the first matching rule's."""
    return next((float(rule["share"]) for rule in script.get("data_wait", [])
                 if matches(cfg, rule)), 0.0)


@dataclass
class Plan:
    """One run of a scripted trial: its records with the second (since start) at which
    each is written, and how it ends.

    ``exit_code`` None: it never exits by itself (a hang). ``hangs_at``: the second it
    stops writing (a hang; its records after that are none). ``stderr``: what it prints.
    """

    events: list[tuple[float, Record]] = field(default_factory=list)
    exit_code: int | None = 0
    stderr: str = ""
    #: The second it exits (or, for a hang, stops writing).
    exit_s: float = 0.0


def _slowdown(script: dict, counter_claim) -> float:
    slowdown = float(script.get("slowdown", 1.0))
    if "slowdown_after" not in script and "run_drift" not in script:
        return slowdown
    started = counter_claim(script["counter"])
    if "slowdown_after" in script:
        slowdown = slowdown if started > int(script["slowdown_after"]) else 1.0
    # Every run its own step times: a run read as another's shows.
    return slowdown * (1 + float(script.get("run_drift", 0.0)) * started)


def count_start(counter: str) -> int:
    """Count this run in the counter file; how many runs have started, this one included."""
    with open(counter, "a") as out:
        out.write(f"{os.getpid()}-{id(out)}\n")
    return len(Path(counter).read_text().splitlines())


def plan_run(cfg: DictConfig, script: dict, run_dir: Path, *, counter_claim=count_start) -> Plan:
    """What the trial of ``cfg`` in ``run_dir`` does under ``script``: the same for the
    process (autotune/testing/fake_trial.py) and the virtual runner."""
    do = behaviour(cfg, script)
    sleep = float(script.get("step_sleep", 0.02)) * (20 if do == "slow" else 1)
    plan = Plan()

    def emit(record: Record) -> None:
        plan.events.append((plan.exit_s, record))

    def finish(outcome: Outcome, reason: str = "") -> Plan:
        emit(EndRecord(outcome=outcome, reason=reason))
        plan.exit_code = outcome.exit_code
        return plan

    emit(StartRecord(world_size=1, budget_gib=BUDGET_GIB, applied={"fake": True, "do": do}))
    if do == "hang_before_first_step":
        plan.exit_code = None
        return plan
    slowdown = _slowdown(script, counter_claim)
    threads = int(cfg.runtime.threads) or 2
    tps = 1000.0 * threads / int(cfg.train.micro_batches)
    if do == "slow":
        tps /= 10
    peak = 2.0 / int(cfg.train.micro_batches)  # bigger micro-batches need more memory
    if do == "sigkill_at_budget":
        peak = 0.95 * BUDGET_GIB
    tokens, wait = 256, data_wait_share(cfg, script)
    steps: list[StepRecord] = []
    for i in range(int(script.get("steps", 6))):
        if i == FAULT_STEP and do == "hang":
            plan.exit_code = None
            return plan
        if i == FAULT_STEP and do == "crash":
            plan.exit_code, plan.stderr = 1, CRASH_TRACEBACK
            return plan
        if i == FAULT_STEP and do in ("sigkill", "sigkill_at_budget"):
            plan.exit_code = SIGKILLED
            return plan
        # Beside the run directory: a new launch finds its directory emptied.
        once = run_dir.with_name(run_dir.name + ".killed-once")
        if i == FAULT_STEP and do == "sigkill_once" and not once.exists():
            once.write_text("")  # the retry then runs to the end
            plan.exit_code = SIGKILLED
            return plan
        if i == FAULT_STEP and do == "diverged":
            return finish(Outcome.DIVERGED, "loss non-finite for 3 consecutive steps")
        if i == 3 and do == "nan_from_start":
            return finish(Outcome.DIVERGED, "loss non-finite for 3 consecutive steps")
        if i == 1 and do == "oom":
            return finish(Outcome.OOM, "peak RSS 9.00 GiB over the memory budget 8.00 GiB")
        if do == "unsupported":
            return finish(Outcome.UNSUPPORTED, "scripted: not on this backend")
        if do == "config_error":
            plan.stderr = "config error: scripted"
            return finish(Outcome.CONFIG_ERROR, "scripted: the trial rejected its config")
        phase = Phase.COMPILE if i == 0 else (Phase.WARMUP if i == 1 else Phase.MEASURE)
        loss = float("nan") if do == "nan_from_start" else 5.0 - 0.1 * i
        step_s = (tokens / tps * slowdown / (1 - wait)  # the wait comes on top of compute
                  * (1 + float(script.get("jitter", 0.0)) * (-1) ** i))
        step = StepRecord(step=i, phase=phase, loss=loss, grad_norm=1.0, step_s=step_s,
                          data_wait_s=wait * step_s, tokens=tokens, peak_rss_gib=peak)
        steps.append(step)
        emit(step)
        plan.exit_s += sleep
    card = scorecard(steps, flops_per_token=1e6, peak_flops=1e12, recompute=False,
                     peak_rss_gib=[peak], budget_gib=BUDGET_GIB, spike_factor=8.0)
    if script.get("unit"):  # a workload that counts samples, not tokens
        card["performance"]["unit"] = script["unit"]
    emit(SummaryRecord(**card))
    return finish(Outcome.OK)
