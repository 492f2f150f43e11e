"""What a diagnosis says: one finding per rule that fired (the report's diagnosis, the
profile's rules), as data first and words second.

The report writes them in the seed's form, one row per finding: area, symptom, the
evidence (the trials and the numbers), the likely cause, the action; then each in words.
Each rule's area and symptom are declared once, in :data:`SYMPTOMS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: rule id -> (area, symptom): loss, memory, throughput, stability, configuration.
SYMPTOMS: dict[str, tuple[str, str]] = {
    "pick": ("throughput", "the pick (what export takes)"),
    "data_bound": ("throughput", "the input pipeline holds the step back"),
    "pipeline": ("throughput", "what the input pipeline costs the step"),
    "low_mfu": ("throughput", "low MFU at a small micro-batch"),
    "slow": ("throughput", "trials stopped as slow"),
    "communication": ("throughput", "communication takes a large share of the step"),
    "data_wait": ("throughput", "the step waits for input data"),
    "dominant_op": ("throughput", "one operator type dominates the step"),
    "host_bound": ("throughput", "the device idles between operators"),
    "cast_overhead": ("throughput", "casts take a large share of the step"),
    "diverged_fp16": ("loss", "fp16 trials diverged"),
    "diverged": ("loss", "trials diverged"),
    "oom": ("memory", "trials ran out of memory"),
    "memory_peaks": ("memory", "memory peaks far above its mean"),
    "hang": ("stability", "trials hung"),
    "timeout": ("stability", "trials ran past the wall-clock cap"),
    "slow_rank": ("stability", "one rank is slower than the others"),
    "crash": ("stability", "trials crashed"),
    "not_run": ("configuration", "trials not run"),
}


@dataclass(frozen=True)
class Finding:
    """One diagnosis: ``rule`` id, subject ``trials``, a ``sentence``, the ``numbers`` it
    cites; ``cause`` and ``action`` where the rule states them apart (else the table takes
    them from the sentence: what follows its first colon is what to do)."""

    rule: str
    trials: tuple[int, ...]
    sentence: str
    numbers: dict[str, float] = field(default_factory=dict, hash=False)
    cause: str = ""
    action: str = ""

    def row(self) -> tuple[str, str, str, str, str]:
        """(area, symptom, evidence, likely cause, action) for the diagnosis table."""
        area, symptom = SYMPTOMS.get(self.rule, ("other", self.rule))
        who = ", ".join(f"#{n}" for n in self.trials[:6]) + (
            f" and {len(self.trials) - 6} more" if len(self.trials) > 6 else "")
        numbers = ", ".join(f"{k} {_number(v)}" for k, v in self.numbers.items())
        evidence = "; ".join(p for p in (who and f"trials {who}", numbers) if p) or "-"
        seen, _, rest = self.sentence.partition(": ")
        action = self.action or (rest.rstrip(".") if rest else seen.rstrip("."))
        return area, symptom, evidence, self.cause or "-", action


def _number(value: float) -> str:
    if not isinstance(value, int | float):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(findings: list[Finding]) -> str:
    """The diagnosis as the seed's table (symptom -> evidence -> likely cause -> action),
    then each finding in words."""
    lines = ["# Diagnosis", ""]
    if not findings:
        return "\n".join(lines + ["- Nothing to report."]) + "\n"
    lines += ["| area | symptom | evidence | likely cause | action |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_cell(c) for c in f.row()) + " |" for f in findings]
    lines += ["", "## In words", ""]
    lines += [f"- **{f.rule}**: {f.sentence}" for f in findings]
    return "\n".join(lines) + "\n"
