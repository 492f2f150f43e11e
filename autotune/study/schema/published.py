"""What ``publish`` uploaded to the Optuna artifact store (``autotune.published``:
``{"<scope>/<name>": Published}``, scope ``study`` or ``trial-NNNN``), so that a file is
uploaded once per content (autotune/study/artifacts.py)."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.study.claims import update_attribute
from autotune.study.schema import keys
from autotune.study.schema.blob import Blob


@dataclass
class Published(Blob):
    sha256: str = ""  # of the content uploaded
    artifact_id: str = ""  # Optuna's id of the upload


def published(study) -> dict[str, Published]:
    return {name: Published.from_json(entry)
            for name, entry in (study.user_attrs.get(keys.PUBLISHED) or {}).items()}


def store_published(study, name: str, entry: Published) -> None:
    """Keep ``entry`` as what ``name`` was uploaded as (it replaces an earlier one)."""
    update_attribute(study, keys.PUBLISHED, lambda stored: stored.update({name: entry.to_json()}))
