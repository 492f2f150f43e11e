"""The one line a production run ends with (``launch.sh`` of an exported job):

    job done: steps 1-3 of 3 (3 this run), 812 samples/s (median step 0.079 s), peak RSS
    0.61 GiB, last checkpoint /jobs/best/checkpoints/step-00000003.safetensors

(one line on the terminal). Throughput is over this run's steps after its first, which
compiles the graph.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from trials.contract.events import StepRecord


def summary_line(steps: Sequence[StepRecord], *, total_steps: int, unit: str,
                 checkpoint: str | None) -> str:
    """``steps``: this run's step records; ``unit``: what ``StepRecord.tokens`` counts
    (tokens or samples); ``checkpoint``: the path of the last one saved, if any."""
    last = f"last checkpoint {checkpoint}" if checkpoint else "no checkpoint saved"
    if not steps:
        return f"job done: all {total_steps} steps were done already, {last}"
    timed = [s.step_s for s in steps[1:]] or [steps[0].step_s]
    median_s = statistics.median(timed)
    rate = f"{steps[-1].tokens / median_s:,.0f} {unit}/s" if median_s > 0 else f"- {unit}/s"
    peak = max(s.peak_rss_gib for s in steps)
    return (f"job done: steps {steps[0].step + 1}-{steps[-1].step + 1} of {total_steps} "
            f"({len(steps)} this run), {rate} (median step {median_s:.3f} s), peak RSS "
            f"{peak:.2f} GiB, {last}")
