"""When a trial's warm-up ends and when it has measured enough, decided step by step.

Warm-up lasts at least ``run.warmup_steps`` and ends when the step time is steady
(two windows agree, :func:`trials.contract.stats.steady`), at most
``max_warmup_steps``. Measuring lasts at least ``run.measure_steps`` and ends when
the 95 % interval of the step time (the mean period) is within +-``run.target_interval``, at
most ``max_measure_steps``. ``run.adaptive=false`` runs exactly the floors.

Under data parallelism every rank must run the same number of steps (each step is
a collective), so a decision that depends on measured times is agreed: every rank
votes and the phase moves on only when all of them say so (``agree``). Decisions
that depend only on the step count need no vote.
"""

from __future__ import annotations

from collections.abc import Callable

from trials.contract.events import Phase
from trials.contract.schema import RunConfig, step_caps
from trials.contract.stats import relative_half_width, steady

#: Given this rank's vote, True when every rank votes True.
Agree = Callable[[bool], bool]


class Measurement:
    """The phase of the next step of a trial, and why measuring stopped."""

    def __init__(self, run: RunConfig, agree: Agree) -> None:
        self.run, self.agree = run, agree
        self.max_warmup, self.max_measure = step_caps(run)
        self.phase = Phase.COMPILE
        self.warmup_s: list[float] = []
        self.measured_s: list[float] = []
        self.warmup_end = ""
        self.stop_reason = ""

    @property
    def total_steps(self) -> int:
        """The most steps the trial can take (compile + warm-up + measured)."""
        return 1 + self.max_warmup + self.max_measure

    def after_step(self, step_s: float) -> bool:
        """Take in the step just run (of phase ``self.phase``); True when the trial is done."""
        if self.phase is Phase.COMPILE:
            self.phase = Phase.WARMUP if self.max_warmup > 0 else Phase.MEASURE
            if self.phase is Phase.MEASURE:
                self.warmup_end = "no warm-up"
            return False
        if self.phase is Phase.WARMUP:
            self._warmup(step_s)
            return False
        self.measured_s.append(step_s)
        return self._measured_enough()

    def _warmup(self, step_s: float) -> None:
        self.warmup_s.append(step_s)
        n, r = len(self.warmup_s), self.run
        if n >= self.max_warmup:
            done, why = True, f"cap of {self.max_warmup} steps"
        elif n >= r.warmup_steps:
            done = self.agree(steady(self.warmup_s, window=r.steady_window,
                                     tolerance=r.steady_tolerance))
            why = f"steady after {n} steps"
        else:
            return
        if done:
            self.phase, self.warmup_end = Phase.MEASURE, why

    def _measured_enough(self) -> bool:
        n, r = len(self.measured_s), self.run
        if n >= self.max_measure:
            width = relative_half_width(self.measured_s)
            self.stop_reason = (f"{n} steps" if not r.adaptive else
                                f"step cap {n}: interval +-{100 * width:.1f} % > target "
                                f"+-{100 * r.target_interval:g} %")
            return True
        if n < r.measure_steps:
            return False
        width = relative_half_width(self.measured_s)
        if self.agree(width <= r.target_interval):
            self.stop_reason = (f"interval +-{100 * width:.1f} % <= target "
                                f"+-{100 * r.target_interval:g} % after {n} steps")
            return True
        return False
