"""The report's "Tuning stages" section: what each stage of ``tune`` found."""

from __future__ import annotations

from autotune.presentation.invocation import autotune_command
from autotune.settings import STAGES as STAGE_ORDER
from autotune.study.schema.stages import StageResult


def markdown(results: dict[str, StageResult | dict]) -> list[str]:
    if not results:
        return []
    out = ["## Tuning stages", "",
           "Correctness, then memory, then the data pipeline, then throughput, then stability "
           f"(`{autotune_command('tune')}`).", ""]
    for stage in STAGE_ORDER:
        stored = results.get(stage)
        if stored is None:
            out.append(f"- **{stage}**: not run")
            continue
        result = stored if isinstance(stored, StageResult) else StageResult.from_json(stored)
        state = "done" if result.done else "stopped" if result.failed else "open"
        out.append(f"- **{stage}** ({state})")
        out += [f"  - {line}" for line in result.lines]
    return [*out, ""]
