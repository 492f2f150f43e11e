"""Stage 1, correctness: the baseline learns, and reduced precision learns the same way.

The baseline runs ``tune.correctness_steps`` steps; its loss must be finite and
falling. Each other precision of the search space then runs the same steps on the
same data from the same seed; its loss curve must follow fp32's: after smoothing
(a moving average), no point of the curve's second half may differ from the
baseline's by more than ``tune.loss_tolerance`` (relative). A precision that
disagrees, or does not finish, is ruled out for the rest of the study, with the
numbers.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from rich.console import Console

from autotune.running.repeat import run_once
from autotune.search import feasibility
from autotune.search.space import PRECISION
from autotune.settings import TuneSettings
from autotune.study.schema.stages import BaselineCurve, CorrectnessResult, PrecisionCheck
from autotune.sweep_context import SweepContext
from trials.contract.outcomes import Outcome

#: Steps of the moving average the curves are compared through (step-to-step noise of
#: a small batch is larger than a precision's effect).
SMOOTHING = 5


def smooth(values: list[float], window: int = SMOOTHING) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.size < window:
        return arr
    return np.convolve(arr, np.ones(window) / window, mode="valid")


def learns(losses: list[float]) -> tuple[bool, str]:
    """Finite and falling: the mean of the last quarter below the first quarter's."""
    if not losses or not all(math.isfinite(v) for v in losses):
        bad = sum(1 for v in losses if not math.isfinite(v))
        return False, f"{bad} of {len(losses)} losses are not finite"
    q = max(1, len(losses) // 4)
    first, last = float(np.mean(losses[:q])), float(np.mean(losses[-q:]))
    if last >= first:
        return False, f"loss not falling: mean {first:.4g} over the first {q} steps, {last:.4g} " \
                      f"over the last {q}"
    return True, f"loss falls from {first:.4g} to {last:.4g} (means of the first and last {q})"


def agreement(reference: list[float], other: list[float], tolerance: float
              ) -> PrecisionCheck:
    """How far ``other``'s smoothed curve strays from ``reference``'s in the second half."""
    n = min(len(reference), len(other))
    if n == 0:
        return PrecisionCheck(agree=False, max_rel_diff=math.inf, at_step=None, steps=0)
    ref, oth = smooth(reference[:n]), smooth(other[:n])
    if not np.all(np.isfinite(oth)):
        return PrecisionCheck(agree=False, max_rel_diff=math.inf, at_step=None, steps=n)
    half = len(ref) // 2
    rel = np.abs(oth[half:] - ref[half:]) / np.maximum(np.abs(ref[half:]), 1e-12)
    worst = int(np.argmax(rel))
    return PrecisionCheck(agree=bool(rel[worst] <= tolerance), max_rel_diff=float(rel[worst]),
                          at_step=half + worst + SMOOTHING - 1, steps=n,
                          reference_loss=float(ref[half + worst]),
                          loss=float(oth[half + worst]))


def run_correctness(context: SweepContext, options: TuneSettings, console: Console
                    ) -> CorrectnessResult:
    """The stage's result: the baseline's verdict, each precision's agreement, and the
    precisions ruled out (``ruled_out: {"precision": {value: reason}}``)."""
    space = context.space
    base = dict(space.baseline)
    steps = options.correctness_steps

    def curve(params: dict, name: str) -> tuple[list[float], str]:
        cfg, problem = feasibility.structural_problem(space, params)
        if problem:
            return [], problem
        run_dir = context.layout.stage("correctness", name)
        run_dir.write_config(cfg)
        console.print(f"  correctness: {name}, {steps} steps ...", markup=False)
        result = run_once(context.runner, run_dir, context.settings, name="stage/correctness",
                          overrides=("run.adaptive=false", "run.warmup_steps=0",
                                     f"run.measure_steps={steps - 1}"))
        losses = [s.loss for s in result.steps]
        if result.reason is not Outcome.OK:
            return losses, f"ended {result.reason.value}: {result.detail}"
        return losses, ""

    reference, problem = curve(base, "baseline")
    ok, verdict = learns(reference) if not problem else (False, problem)
    result = CorrectnessResult(done=True, steps=steps, tolerance=options.loss_tolerance,
                               baseline=BaselineCurve(params=base, learns=ok, verdict=verdict,
                                                      losses=reference))
    lines = [f"baseline ({base.get(PRECISION, 'its precision')}): {verdict}"]
    if not ok:
        result.lines = lines + ["the baseline does not learn: fix the job before tuning it"]
        result.failed = True
        return result
    precision_knob = next((k for k in space.knobs if k.path == PRECISION), None)
    for value in precision_knob.choices if precision_knob else []:
        if value == base.get(PRECISION):
            continue
        losses, problem = curve({**base, PRECISION: value}, f"precision-{value}")
        # A run that ended early still has the curve it drew: its numbers come along (a
        # precision whose updates were all skipped ends diverged with a finite, flat loss).
        check = agreement(reference, losses, options.loss_tolerance)
        if problem:
            check = dataclasses.replace(check, agree=False, problem=problem)
        check = dataclasses.replace(check, losses=losses)
        result.precisions[value] = check
        if check.agree:
            lines.append(f"precision {value}: agrees with {base.get(PRECISION)} (largest "
                         f"smoothed difference {100 * check.max_rel_diff:.2f} % <= "
                         f"{100 * options.loss_tolerance:g} %)")
            continue
        why = problem or (f"its smoothed loss {check.loss:.4g} differs from the baseline's "
                          f"{check.reference_loss:.4g} by {100 * check.max_rel_diff:.1f} % "
                          f"at step {check.at_step} (tolerance "
                          f"{100 * options.loss_tolerance:g} % over {steps} steps)")
        result.ruled_out.setdefault(PRECISION, {})[str(value)] = why
        lines.append(f"precision {value}: RULED OUT: {why}")
    if not precision_knob:
        lines.append("no other precision in the search space to compare")
    result.lines = lines
    return result

