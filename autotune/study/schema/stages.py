"""What ``tune``'s stages store (``autotune.stages``: ``{stage name: StageResult}``).

Every stage writes the fields of :class:`StageResult`; a stage with findings of its own
stores a subclass (:data:`RESULT_OF` names which), whose fields sit beside them in the
same JSON object (autotune/stages/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.study.claims import update_attribute
from autotune.study.schema import keys
from autotune.study.schema.blob import Blob


@dataclass
class StageResult(Blob):
    done: bool = False
    failed: bool = False  # tune stopped here
    lines: list[str] = field(default_factory=list)  # the sentences the report shows
    #: knob -> {value (as text): why the sweep must not launch it}
    ruled_out: dict[str, dict[str, str]] = field(default_factory=dict)
    # The memory stage: how many points of the space fit with headroom, only without, not
    # at all (``fit`` None: the stage made no estimate).
    fit: int | None = None
    points: int | None = None
    tight: int = 0
    over: int = 0
    # The stability stage: the soaked trial and what its soak found wrong.
    trial: int | None = None
    issues: list[str] | None = None


@dataclass
class BaselineCurve(Blob):
    """The correctness stage's baseline: did its loss learn?"""

    params: dict[str, Any] = field(default_factory=dict)
    learns: bool = False
    verdict: str = ""
    losses: list[float] = field(default_factory=list)


@dataclass
class PrecisionCheck(Blob):
    """One precision's smoothed loss curve against the baseline's, over its second half."""

    agree: bool = False
    max_rel_diff: float | None = None  # inf: no step, or a non-finite loss
    at_step: int | None = None  # where the difference is largest
    steps: int = 0  # compared
    reference_loss: float | None = None  # the baseline's smoothed loss there
    loss: float | None = None  # this precision's
    problem: str | None = None  # the run did not finish: why
    losses: list[float] = field(default_factory=list)


@dataclass
class CorrectnessResult(StageResult):
    NESTED = {"baseline": BaselineCurve}

    steps: int = 0
    tolerance: float = 0.0
    baseline: BaselineCurve | None = None
    precisions: dict[str, PrecisionCheck] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["precisions"] = {k: v.to_json() for k, v in self.precisions.items()}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CorrectnessResult:
        result = super().from_json(data)
        result.precisions = {k: PrecisionCheck.from_json(v)
                             for k, v in (result.precisions or {}).items()}
        return result


@dataclass
class MemoryResult(StageResult):
    budget_gib: float | None = None
    headroom: float | None = None
    impossible: int = 0  # points that cannot run on this hardware at all
    model: str | None = None  # the source of the cost model's constants
    over_examples: list[dict[str, Any]] = field(default_factory=list)  # the worst points


@dataclass
class DataResult(StageResult):
    data_bound: bool | None = None
    baseline: int | None = None  # its trial number
    trials: list[int] = field(default_factory=list)  # the data changes tried


#: The stages that store more than a StageResult, and what they store.
RESULT_OF: dict[str, type[StageResult]] = {
    "correctness": CorrectnessResult, "memory": MemoryResult, "data": DataResult}


def stage_results(study) -> dict[str, StageResult]:
    return {stage: RESULT_OF.get(stage, StageResult).from_json(result)
            for stage, result in (study.user_attrs.get(keys.STAGES) or {}).items()}


def store_stage_result(study, stage: str, result: StageResult) -> None:
    """Keep ``stage``'s result (it replaces an earlier one)."""
    update_attribute(study, keys.STAGES, lambda stored: stored.update({stage: result.to_json()}))
