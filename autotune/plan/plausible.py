"""Whether a fit's constants can still describe the runs they were fitted to.

A least-squares fit bends its constants as far as the data push it. When the model's terms
do not describe the runs (a wrong peak, other model dimensions, too few trials for the
constants freed), the fit lands outside the range a training run can have, and such a fit
would mislead every later prediction. ``calibrate`` refuses it (nothing stored) and so does
a sweep's refit (the study keeps the fit it had). The reason names the constant.
"""

from __future__ import annotations

from dataclasses import fields, replace

from autotune.plan.calibration import Measurement
from autotune.plan.predict import Constants
from trials.contract.schema import Mode

#: The constants the peak-memory fit sets; the time fit sets the others (calibration.fit
#: fits the two apart, from different measurements).
MEMORY_FIELDS = ("runtime_overhead_gib", "allocator_factor", "activation_factor",
                 "memory_uncertainty", "activation_dtypes")

#: A compute efficiency under this fraction of the peak means the peak or the dimensions
#: do not match the runs.
MIN_COMPUTE_EFFICIENCY = 0.02
#: The allocator's factor over the model's states and buffers.
MAX_ALLOCATOR_FACTOR = 4.0
#: Measured activations over Korthikanti et al.'s count: the largest fitted on real CPU
#: trials is 12.8 (fp16, MindSpore's CPU backend keeps extra copies:
#: docs/benchmarks-history.md, "CPU validation"); past this the peaks are not the model's
#: terms. (Issue 21: a sweep's fit of 3 trials left float32 at 24.3.)
MAX_ACTIVATION_FACTOR = 16.0


def implausible(constants: Constants, points: list[Measurement]) -> str | None:
    """Why a fit's constants cannot describe these runs, or None."""
    dtypes = sorted({p.job.dtype.value for p in points})
    for dtype in dtypes:
        eff = constants.compute_efficiency[dtype]
        if eff < MIN_COMPUTE_EFFICIENCY:
            return (f"the fitted {dtype} compute efficiency is {100 * eff:.2f} % of the peak "
                    f"(under {100 * MIN_COMPUTE_EFFICIENCY:.0f} %): the profile's peak or the "
                    "runs' model dimensions do not match the runs")
    for mode in sorted({p.job.mode for p in points if p.step_s}, key=lambda m: m.value):
        steps = [p for p in points if p.step_s and p.job.mode is mode]
        shortest = min(p.step_s for p in steps)
        overhead, latency = constants.step_overhead(mode), constants.layer_latency(mode)
        what = f" ({mode.value})" if mode is Mode.pynative else ""
        if overhead > shortest:
            return (f"the fitted fixed step overhead{what} {overhead:.3g} s exceeds "
                    f"the shortest measured step ({shortest:.3g} s)")
        fixed = min(p.dims.layers // p.job.pp * p.job.micro_batches for p in steps)
        if latency * fixed > shortest:
            return (f"the fitted latency per layer and micro-batch{what} {latency:.3g} s "
                    "makes a run's fixed cost longer than the shortest measured step")
    if constants.allocator_factor > MAX_ALLOCATOR_FACTOR:
        return (f"the fitted allocator factor {constants.allocator_factor:.2f} is over "
                f"{MAX_ALLOCATOR_FACTOR:g}: the peaks given are not the model's terms")
    for dtype in dtypes:
        factor = constants.activation_factor[dtype]
        if factor > MAX_ACTIVATION_FACTOR:
            return (f"the fitted {dtype} activation factor {factor:.1f} is over "
                    f"{MAX_ACTIVATION_FACTOR:g}: the peaks given are not the model's terms")
    return None


def plausible_part(fitted: Constants, current: Constants, points: list[Measurement],
                   ) -> tuple[Constants | None, str | None, str | None]:
    """(the constants to keep, the reason a part was refused, which part) of a refit.

    The time and the memory constants are fitted apart, so an implausible memory fit (an
    allocator factor pushed past its range to put a measured OOM over its budget) says
    nothing against the time fit, and the other way round: the implausible part keeps
    the ``current`` constants, the other is taken. (None, reason, "all") when neither
    part alone is plausible."""
    problem = implausible(fitted, points)
    if problem is None:
        return fitted, None, None
    memory = {f: getattr(current, f) for f in MEMORY_FIELDS}
    time = {f.name: getattr(current, f.name) for f in fields(Constants)
            if f.name not in (*MEMORY_FIELDS, "source")}
    for kept, part in ((memory, "memory"), (time, "time")):
        candidate = replace(fitted, **kept)
        if implausible(candidate, points) is None:
            named = f"{fitted.source}, its {part} constants kept from the previous fit"
            return replace(candidate, source=named), problem, part
    return None, problem, "all"
