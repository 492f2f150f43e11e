"""What a diagnosis says: one finding per rule that fired (the report's diagnosis, the
profile's rules), as data first and words second."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    """One diagnosis: ``rule`` id, subject ``trials``, a ``sentence``, the ``numbers`` it cites."""

    rule: str
    trials: tuple[int, ...]
    sentence: str
    numbers: dict[str, float] = field(default_factory=dict, hash=False)


def to_markdown(findings: list[Finding]) -> str:
    lines = ["# Diagnosis", ""]
    lines += [f"- **{f.rule}**: {f.sentence}" for f in findings] or ["- Nothing to report."]
    return "\n".join(lines) + "\n"
