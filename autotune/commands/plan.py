"""``python -m autotune plan``: rank every configuration of a workload on a cluster before
launching anything; works for configurations this machine can never run.

    python -m autotune plan workload=llama2_70b hardware=ascend_910b plan.nodes=4
    python -m autotune plan workload=gpt3_175b hardware=gpu_a100 plan.nodes=128 \\
        plan.global_batch=1536

Writes plan.csv (every point, with the reason a ruled-out one does not fit), plan.md
(the ranked table, or when nothing fits the closest configurations and what each lacks),
plan.png (predicted tokens/s against predicted peak memory, the budget as a line) and
breakdown.png (the best configurations' step time by part) into ``plan.out``. The
planning, ranking and tables are autotune/plan/planner.py and autotune/plan/plan_output.py;
this is the verb.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from rich.console import Console

from autotune.plan.plan_output import default_name, make_plan
from autotune.plan.planner import ignored_override
from autotune.settings import SweepConfig
from trials.contract.schema import ConfigError, to_trial_config

__all__ = ["default_name", "run"]


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    refused = ignored_override(overrides)
    if refused:
        raise ConfigError(refused)
    settings, sweep = config.plan, config.sweep
    for line in make_plan(to_trial_config(composed), settings, Path(sweep.runs_dir),
                          overrides):
        console.print(line, markup=False, soft_wrap=True)
    return 0
