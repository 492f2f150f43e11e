"""A simulated trial: what the cost model predicts, in the metrics format, with noise.

    python -m autotune.plan.simulate --config runs/s/trial-0003/config.yaml

Called exactly like the trial program (``sweep.simulate=true`` makes the sweep use it),
it writes the same typed records through the same writer and exits with the same codes,
so a whole sweep of a space this machine cannot run (``search=accelerator
hardware=ascend_910b``) goes through feasibility, ``predicted_oom``, the sampler, the
report and the export. Noise: tokens/s varies between runs by the profile's
``cost.run_to_run_cv`` and step times within a run by ``cost.step_to_step_cv`` (on
this CPU: bench/trial_repeatability.py). Every record says ``simulated``; nothing
here is a measurement, and the calibration never learns from it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

from autotune.plan.costmodel import CostModel
from trials.contract.compose import load_resolved
from trials.contract.events import (
    EndRecord,
    Phase,
    Record,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.launch import MARKER_ENV
from trials.contract.metrics import MetricsLog
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance
from trials.contract.schema import ConfigError, memory_budget_gib, to_trial_config, validate
from trials.contract.scorecard import scorecard
from trials.contract.vocabulary import Recompute


def _rng() -> np.random.Generator:
    """Seeded by the launch marker: repeats of one configuration differ, a rerun of the
    same launch does not."""
    marker = os.environ.get(MARKER_ENV, "")
    return np.random.default_rng(int(hashlib.sha256(marker.encode()).hexdigest()[:12], 16))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autotune.plan.simulate")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    try:
        cfg = to_trial_config(load_resolved(args.config, args.overrides))
        validate(cfg)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return Outcome.CONFIG_ERROR.exit_code
    log = MetricsLog(Path(cfg.run.metrics_path))
    outcome, reason = simulate(cfg, log)
    log.emit(EndRecord(outcome=outcome, reason=reason))
    log.close()
    return outcome.exit_code


class _Collected(list):
    """Records kept in order, where the program writes them to its metrics file."""

    def emit(self, record: Record) -> None:
        self.append(record)


def simulated_run(config: Path, overrides: list[str], seed: int) -> tuple[list[Record], int]:
    """What ``python -m autotune.plan.simulate --config CONFIG OVERRIDES`` writes, in
    order, and its exit code, without a process (autotune/testing plays it in virtual
    time); ``seed`` in place of the launch marker's."""
    records = _Collected()
    try:
        cfg = to_trial_config(load_resolved(config, overrides))
        validate(cfg)
    except ConfigError:
        return [], Outcome.CONFIG_ERROR.exit_code
    outcome, reason = simulate(cfg, records, np.random.default_rng(seed))
    records.emit(EndRecord(outcome=outcome, reason=reason))
    return list(records), outcome.exit_code


def simulate(cfg, log: MetricsLog, rng: np.random.Generator | None = None
             ) -> tuple[Outcome, str]:
    model = CostModel.for_profile(cfg.hardware)
    prediction = model.predict_config(cfg)
    budget = memory_budget_gib(cfg)
    log.emit(StartRecord(world_size=cfg.parallel.devices,
                         total_steps=1 + cfg.run.warmup_steps + cfg.run.measure_steps,
                         accumulation=cfg.train.micro_batches,
                         tokens_per_step=prediction.tokens_per_step if prediction else None,
                         flops_per_token=prediction.model_flops_per_token if prediction else None,
                         budget_gib=budget,
                         applied={"simulated": True, "constants": model.constants.source}))
    if prediction is None:
        return Outcome.CONFIG_ERROR, "a user workload has no dimensions to simulate"
    if prediction.step_s is None:
        return Outcome.CONFIG_ERROR, (f"hardware profile {cfg.hardware.name} has no peak "
                                      f"FLOP/s for {cfg.precision.dtype.value}")
    noise = cfg.hardware.cost
    rng = rng or _rng()
    run_factor = float(np.exp(rng.normal(0.0, noise.run_to_run_cv)))
    steps = []
    total = 1 + cfg.run.warmup_steps + cfg.run.measure_steps
    for i in range(total):
        phase = Phase.COMPILE if i == 0 else (
            Phase.WARMUP if i <= cfg.run.warmup_steps else Phase.MEASURE)
        jitter = float(np.exp(rng.normal(0.0, noise.step_to_step_cv)))
        step_s = prediction.step_s * run_factor * jitter * (10.0 if i == 0 else 1.0)
        step = StepRecord(step=i, phase=phase, loss=10.0 / (1 + 0.1 * i), grad_norm=1.0,
                          step_s=step_s, data_wait_s=prediction.time.data_wait,
                          tokens=prediction.tokens_per_step, peak_rss_gib=prediction.peak_gib)
        steps.append(step)
        log.emit(step)
        if prediction.peak_gib > budget:
            return Outcome.OOM, (f"simulated: predicted peak {prediction.peak_gib:.2f} GiB over "
                                 f"the memory budget {budget:.2f} GiB")
    card = scorecard(steps, flops_per_token=prediction.model_flops_per_token,
                     peak_flops=prediction.peak_flops_total,
                     recompute=cfg.train.recompute is Recompute.full,
                     peak_rss_gib=[prediction.peak_gib] * cfg.parallel.devices,
                     budget_gib=budget, spike_factor=cfg.guard.spike_factor,
                     spike_after_steps=cfg.guard.spike_after_steps)
    card["performance"] = Performance.from_dict(card["performance"]).replace(
        simulated=True).to_dict()
    log.emit(SummaryRecord(**card))
    return Outcome.OK, ""


if __name__ == "__main__":
    sys.exit(main())
