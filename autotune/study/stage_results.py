"""Stage results on the study: what each stage found, and the knob values it ruled out.

``autotune.stages`` maps a stage name to its result (a JSON dict with ``done`` and
``lines``, the sentences the report shows). The correctness stage's ``ruled_out``
maps a knob to the values the sweep must not launch, each with its reason.
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.study.schema.keys import STAGES

STAGES_KEY = STAGES


def results(study: optuna.Study) -> dict[str, dict]:
    return dict(study.user_attrs.get(STAGES_KEY) or {})


def save(study: optuna.Study, stage: str, result: dict) -> None:
    stored = results(study)
    stored[stage] = result
    study.set_user_attr(STAGES_KEY, stored)


def ruled_out(study: optuna.Study) -> dict[str, dict[str, str]]:
    """knob -> {value (as text): reason} from every stored stage."""
    out: dict[str, dict[str, str]] = {}
    for result in results(study).values():
        for knob, values in (result.get("ruled_out") or {}).items():
            out.setdefault(knob, {}).update(values)
    return out


def ruling(ruled: dict[str, dict[str, str]], params: dict[str, Any]) -> str | None:
    """Why ``params`` may not run, or None."""
    for knob, values in ruled.items():
        reason = values.get(str(params.get(knob)))
        if reason is not None:
            return f"ruled out by the correctness stage: {knob}={params[knob]}: {reason}"
    return None
