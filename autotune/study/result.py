"""How a launched trial ended: what the follow loop (autotune/running/monitor.py) hands
to scoring (autotune/study/scoring.py), which tells Optuna."""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.study.conditions import Conditions
from trials.contract.events import ProfileRecord, StartRecord, StepRecord, SummaryRecord
from trials.contract.outcomes import Outcome


@dataclass
class TrialResult:
    """How a launched trial ended."""

    reason: Outcome
    detail: str = ""
    summary: SummaryRecord | None = None
    steps: list[StepRecord] = field(default_factory=list)
    start: StartRecord | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    log_tail: str = ""
    #: run.profile_steps > 0: where the profiled steps' time went.
    profile: ProfileRecord | None = None
    #: Lost to its node (failure, preemption), not to its configuration: worth one retry.
    retry: bool = False
    #: Killed on purpose by a hook (a soak's SIGKILL drill); ``detail`` says when.
    killed: bool = False
    #: The host's state over its measured steps (autotune/running/conditions.py); None
    #: when nothing measured it (a replayed run followed without a meter).
    conditions: Conditions | None = None
