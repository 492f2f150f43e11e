"""Stage 2, memory: which configurations of the space fit, with headroom.

Every point of the search space (up to MAX_POINTS, a seeded sample beyond) goes
through the cost model (autotune/plan/): a point *fits* when its predicted peak
leaves ``tune.headroom`` of the budget free, is *tight* when it fits without that
headroom, and is *over* otherwise. The sweep then rules out what is over by more
than its margin before launching (``sweep.predict``), and the model is refitted on
every measured trial, so this stage is the first look, not the last word.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.search import feasibility
from autotune.settings import TuneSettings
from autotune.study.schema.stages import MemoryResult
from autotune.sweep_context import SweepContext

MAX_POINTS = 4096
#: Seconds between the stage's progress lines (a large space takes minutes).
PROGRESS_EVERY_S = 15.0


@dataclass(frozen=True)
class _Point:
    params: dict[str, Any]
    peak_gib: float  # predicted


def run_memory(context: SweepContext, options: TuneSettings,
               say: Callable[[str], None] = lambda line: None,
               clock: Callable[[], float] = time.monotonic) -> MemoryResult:
    model = context.model
    if model is None:
        return MemoryResult(done=True, lines=[
            f"no cost model for workload {context.base.workload.name} (a model given by "
            "its own code, workload.entry: its dimensions are not the model's to know): the "
            "sweep measures memory trial by trial"])
    points = context.space.points()
    if len(points) > MAX_POINTS:
        points = random.Random(0).sample(points, MAX_POINTS)
    budget = context.budget_gib
    limit = budget * (1 - options.headroom)
    fits, tight, over, impossible = [], [], [], 0
    say(f"predicting the peak memory of {len(points):,} points of the space")
    next_line = clock() + PROGRESS_EVERY_S
    for done, params in enumerate(points):
        if (now := clock()) >= next_line:
            say(f"{done:,} of {len(points):,} points predicted")
            next_line = now + PROGRESS_EVERY_S
        cfg, problem = feasibility.structural_problem(context.space, params)
        if problem:
            impossible += 1
            continue
        peak = model.predict_config(cfg).peak_gib
        row = _Point(params, peak)
        (fits if peak <= limit else tight if peak <= budget else over).append(row)
    possible = len(fits) + len(tight) + len(over)
    lines = [f"{len(fits):,} of {possible:,} configurations fit the {budget:.2f} GiB budget "
             f"with {100 * options.headroom:g} % headroom (predicted peak <= {limit:.2f} GiB), "
             f"{len(tight):,} fit without it, {len(over):,} are predicted over the budget"
             + (f"; {impossible:,} are impossible on this hardware" if impossible else "")]
    if over:
        worst = max(over, key=lambda r: r.peak_gib)
        lines.append(f"largest predicted peak {worst.peak_gib:.2f} GiB: "
                     + ", ".join(f"{k}={v}" for k, v in worst.params.items()))
    best_fit = min(fits + tight, key=lambda r: r.peak_gib, default=None)
    if best_fit is not None:
        lines.append(f"smallest predicted peak {best_fit.peak_gib:.2f} GiB "
                     f"({100 * (1 - best_fit.peak_gib / budget):.0f} % headroom)")
    return MemoryResult(done=True, budget_gib=budget, headroom=options.headroom,
                        points=possible, fit=len(fits), tight=len(tight), over=len(over),
                        impossible=impossible, model=model.constants.source, lines=lines,
                        over_examples=[r.params for r in
                                       sorted(over, key=lambda r: -r.peak_gib)[:5]])
