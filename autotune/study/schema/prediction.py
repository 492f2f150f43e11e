"""The cost model's prediction of a trial, stored before it launches (``prediction``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.study.schema.blob import Blob


@dataclass
class StoredPrediction(Blob):
    peak_gib: float | None = None
    peak_interval_gib: list[float] = field(default_factory=list)  # [low, high]
    memory_gib: dict[str, float] = field(default_factory=dict)  # by term (parameters, ...)
    step_s: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    time_s: dict[str, float] | None = None  # by term (compute, all-reduce, bubble, ...)
    memory_uncertainty: float | None = None
    time_uncertainty: float | None = None
    constants: str | None = None  # where the model's constants came from (priors, a fit)
