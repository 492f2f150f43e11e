"""A fit of the cost model's constants (``cost_model_fit`` on a study: the study's own fit;
the same record is ``calibrate``'s imported fit in the cache, autotune/plan/calibration.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.study.schema.blob import Blob


@dataclass
class FitRecord(Blob):
    profile: str = ""  # the hardware profile it was fitted on
    fitted_at: float | None = None  # epoch seconds
    #: The fitted Constants as a dict (autotune/plan/predict.py); a record of another
    #: model version (other fields, other shapes) is not used.
    constants: dict[str, Any] | None = None
