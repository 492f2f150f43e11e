"""The report's "Tuning stages" section: what each stage of ``tune`` found."""

from __future__ import annotations

from autotune.settings import STAGES as STAGE_ORDER


def markdown(results: dict[str, dict]) -> list[str]:
    if not results:
        return []
    out = ["## Tuning stages", "",
           "Correctness, then memory, then the data pipeline, then throughput, then stability "
           "(`python -m autotune tune`).", ""]
    for stage in STAGE_ORDER:
        result = results.get(stage)
        if result is None:
            out.append(f"- **{stage}**: not run")
            continue
        state = "done" if result.get("done") else "stopped" if result.get("failed") else "open"
        out.append(f"- **{stage}** ({state})")
        out += [f"  - {line}" for line in result.get("lines", [])]
    return [*out, ""]
