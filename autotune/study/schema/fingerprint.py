"""What makes a study the same study (``autotune.fingerprint``: a hash of the parts in
``autotune.fingerprint_parts``; autotune/search/space.py builds the parts, and
autotune/study/storage.py refuses a resume whose parts changed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf

from autotune.study.schema import keys
from autotune.study.schema.blob import Blob
from trials.contract.schema import TrialConfig

#: The run settings that decide what a trial's tokens/s means (part of the fingerprint).
MEASUREMENT_KEYS = ("adaptive", "warmup_steps", "max_warmup_steps", "steady_window",
                    "steady_tolerance", "measure_steps", "max_measure_steps", "target_interval")


def run_parts(base: TrialConfig, *, simulated: bool) -> dict[str, Any]:
    """What a study records of the run it measures: the workload, the hardware profile and
    the measurement protocol (the fingerprint's parts beside the search space)."""
    b = OmegaConf.structured(base)
    run = OmegaConf.to_container(b.run)
    return {"workload": OmegaConf.to_container(b.workload),
            "hardware": OmegaConf.to_container(b.hardware),
            "measurement": {"run": {k: run[k] for k in MEASUREMENT_KEYS},
                            "global_batch": base.train.global_batch,
                            "data": OmegaConf.to_container(b.data),
                            # Simulated and measured trials never share a study.
                            "simulated": simulated}}


@dataclass
class FingerprintParts(Blob):
    search_space: Any = None
    search_devices: int | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)  # the hardware profile
    measurement: dict[str, Any] = field(default_factory=dict)  # run protocol, batch, data


def stored_fingerprint(study) -> tuple[str | None, FingerprintParts]:
    """The study's fingerprint (None: written before there was one) and its parts."""
    return (study.user_attrs.get(keys.FINGERPRINT),
            FingerprintParts.from_json(study.user_attrs.get(keys.FINGERPRINT_PARTS)))
