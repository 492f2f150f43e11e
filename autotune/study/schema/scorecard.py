"""A trial's scorecard as stored (``scorecard``): four layers, computed by the trial program
from its step records (trials/contract/scorecard.py writes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.study.schema.blob import Blob
from trials.contract.performance import Performance


@dataclass
class Correctness(Blob):
    loss_start: float | None = None
    loss_end: float | None = None
    loss_trend_per_step: float = 0.0
    loss_falling: bool = False
    grad_norm_median: float | None = None
    grad_norm_max: float | None = None
    nonfinite_steps: int = 0
    finite_loss_steps: int = 0


@dataclass
class Stability(Blob):
    overflow_steps: int = 0
    skipped_updates: int = 0
    clipped_steps: int = 0
    loss_spikes: int = 0  # steps the trainer's guard judged as spikes


@dataclass
class Resources(Blob):
    peak_rss_gib_max_rank: float | None = None
    peak_rss_gib_total: float | None = None
    peak_rss_gib_per_rank: list[float] = field(default_factory=list)
    memory_budget_gib: float | None = None


@dataclass
class Scorecard(Blob):
    """The layers; a layer the trial never wrote (stopped before it measured) reads empty."""

    NESTED = {"correctness": Correctness, "stability": Stability, "resources": Resources}

    correctness: Correctness = field(default_factory=Correctness)
    performance: Performance = field(default_factory=Performance)
    stability: Stability = field(default_factory=Stability)
    resources: Resources = field(default_factory=Resources)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "performance": self.performance.to_dict()}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Scorecard:
        data = data or {}
        card = super().from_json({k: v for k, v in data.items() if k != "performance"})
        card.performance = Performance.from_dict(data.get("performance"))
        return card
