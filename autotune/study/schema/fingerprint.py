"""What makes a study the same study (``autotune.fingerprint``: a hash of the parts in
``autotune.fingerprint_parts``; autotune/search/space.py builds the parts, and
autotune/study/storage.py refuses a resume whose parts changed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.study.schema import keys
from autotune.study.schema.blob import Blob


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
