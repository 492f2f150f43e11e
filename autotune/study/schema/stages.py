"""What ``tune``'s stages store (``autotune.stages``: ``{stage name: StageResult}``).

Every stage writes these fields; a stage's own findings (the correctness stage's
baseline and precisions, the memory stage's budget, ...) are kept beside them in the
same JSON object, for that stage to read (autotune/stages/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.study.schema import keys
from autotune.study.schema.blob import Blob


@dataclass
class StageResult(Blob):
    done: bool = False
    failed: bool = False  # tune stopped here
    lines: list[str] = field(default_factory=list)  # the sentences the report shows
    #: knob -> {value (as text): why the sweep must not launch it}
    ruled_out: dict[str, dict[str, str]] = field(default_factory=dict)


def stage_results(study) -> dict[str, StageResult]:
    return {stage: StageResult.from_json(result)
            for stage, result in (study.user_attrs.get(keys.STAGES) or {}).items()}


def store_stage_result(study, stage: str, result: dict[str, Any]) -> None:
    """Keep ``stage``'s result (its JSON, with the stage's own fields) with a version."""
    stored = dict(study.user_attrs.get(keys.STAGES) or {})
    stored[stage] = {**result, **StageResult.version_stamp()}
    study.set_user_attr(keys.STAGES, stored)
