"""The base of every stored blob: a dataclass written as a JSON object with a version.

``from_json`` reads what any earlier autotune wrote: a missing field takes its default, an
unknown one is ignored, a missing ``version`` reads as 1 (the blobs stored before they
carried one). Fields that are blobs themselves are named in ``NESTED``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

B = TypeVar("B", bound="Blob")

#: The key every blob's JSON carries its format version under.
VERSION_KEY = "version"


class Blob:
    """Mixed into a dataclass: ``to_json()``/``from_json()`` with a format version."""

    VERSION: ClassVar[int] = 1
    #: field name -> the Blob class of its value (a list of them where the field is a list).
    NESTED: ClassVar[dict[str, type[Blob]]] = {}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {VERSION_KEY: self.VERSION}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, Blob):
                value = value.to_json()
            elif isinstance(value, list) and f.name in self.NESTED:
                value = [v.to_json() if isinstance(v, Blob) else v for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls: type[B], data: dict[str, Any] | None) -> B:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        known = {k: v for k, v in (data or {}).items() if k in names}
        for name, nested in cls.NESTED.items():
            value = known.get(name)
            if isinstance(value, dict):
                known[name] = nested.from_json(value)
            elif isinstance(value, list):
                known[name] = [nested.from_json(v) if isinstance(v, dict) else v
                               for v in value]
        return cls(**known)

    @staticmethod
    def version_of(data: dict[str, Any] | None) -> int:
        return int((data or {}).get(VERSION_KEY, 1))

    @classmethod
    def version_stamp(cls) -> dict[str, int]:
        """What a writer that builds the JSON itself adds to it."""
        return {VERSION_KEY: cls.VERSION}
