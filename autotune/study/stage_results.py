"""Stage results on the study: what each stage found, and the knob values it ruled out.

``autotune.stages`` maps a stage name to its result (schema.stages.StageResult: ``done``,
``lines``, the sentences the report shows; a stage with findings of its own stores a
subclass). The correctness stage's ``ruled_out`` maps a knob to the values the sweep must
not launch, each with its reason.
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.study.schema.stages import StageResult, stage_results, store_stage_result


def save(study: optuna.Study, stage: str, result: StageResult) -> None:
    store_stage_result(study, stage, result)


def ruled_out(study: optuna.Study) -> dict[str, dict[str, str]]:
    """knob -> {value (as text): reason} from every stored stage."""
    out: dict[str, dict[str, str]] = {}
    for result in stage_results(study).values():
        for knob, values in result.ruled_out.items():
            out.setdefault(knob, {}).update(values)
    return out


def ruling(ruled: dict[str, dict[str, str]], params: dict[str, Any]) -> str | None:
    """Why ``params`` may not run, or None."""
    for knob, values in ruled.items():
        reason = values.get(str(params.get(knob)))
        if reason is not None:
            return f"ruled out by the correctness stage: {knob}={params[knob]}: {reason}"
    return None
