"""Field rules declared beside each schema field, and the one checker that applies them.

    lr: float = field(default=1e-3, metadata=rule(gt=0))

:func:`check_fields` walks a (nested) dataclass and raises :class:`ConfigError`
naming the override path and the allowed range, e.g.
``sweep.n_trials=-1 must be >= 1``. Types and enum values are OmegaConf's job
(at compose time); ranges and allowed strings are this module's.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from trials.contract.paths import location_problem


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the override to fix."""


def rule(*, ge: float | None = None, gt: float | None = None, le: float | None = None,
         lt: float | None = None, one_of: tuple | None = None,
         path: str | None = None) -> dict[str, Any]:
    """Field metadata: bounds (inclusive ``ge``/``le``, exclusive ``gt``/``lt``), choices,
    or what a path must be (``path``: a kind of :mod:`trials.contract.paths`)."""
    spec = {"ge": ge, "gt": gt, "le": le, "lt": lt, "one_of": one_of, "path": path}
    return {"autotune.rule": {k: v for k, v in spec.items() if v is not None}}


def _problem(value: Any, spec: dict[str, Any]) -> str | None:
    if "path" in spec:  # empty: the command's default place
        return location_problem(value, spec["path"]) if isinstance(value, str) and value \
            else None
    if "one_of" in spec:
        if value not in spec["one_of"]:
            return f"must be one of {', '.join(map(str, spec['one_of']))}"
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None  # a type problem: OmegaConf reports those at compose time
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    checks = (("ge", lambda b: value >= b, ">="), ("gt", lambda b: value > b, ">"),
              ("le", lambda b: value <= b, "<="), ("lt", lambda b: value < b, "<"))
    failed = [f"{sign} {spec[key]:g}" for key, ok, sign in checks if key in spec
              and not ok(spec[key])]
    if not failed:
        return None
    bounds = [f"{sign} {spec[key]:g}" for key, _, sign in checks if key in spec]
    return "must be " + " and ".join(bounds)


def check_fields(obj: Any, path: str) -> None:
    """Apply every field rule of a dataclass instance (recursively); ConfigError on the first."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}" if path else f.name
        if dataclasses.is_dataclass(value):
            check_fields(value, where)
            continue
        spec = f.metadata.get("autotune.rule")
        if spec is None or value is None:
            continue
        problem = _problem(value, spec)
        if problem:
            sep = ": " if "path" in spec else " "
            raise ConfigError(f"{where}={value}{sep}{problem}")


def path_problem(schema: type, path: str, value: Any) -> str | None:
    """Why ``value`` breaks the rule of the field at ``path`` (dotted, from ``schema``), or
    None: the rule declared beside the field, applied to one value (a search knob's)."""
    section, _, rest = path.partition(".")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    if section not in fields:
        return None
    if rest:
        inner = typing.get_type_hints(schema).get(section)
        return path_problem(inner, rest, value) if dataclasses.is_dataclass(inner) else None
    spec = fields[section].metadata.get("autotune.rule")
    return None if spec is None or value is None else _problem(value, spec)
