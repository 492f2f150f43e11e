"""A value in a config-group file that its schema refuses, as one line naming the file (and
line), the key, the value and what the schema's field expects.

Hydra wraps OmegaConf's validation error in "In 'hardware/mine': ValidationError raised
while composing config:" and puts the key, value and type on later lines; the inner error
carries them as data (``full_key``, ``value``, ``object_type``), which is what is read here.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from collections.abc import Iterable
from pathlib import Path

import yaml
from hydra.errors import ConfigCompositionException
from omegaconf import MISSING
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException


def config_dirs(searchpath: Iterable[str], conf_dir: Path) -> list[Path]:
    """The folders Hydra reads config groups from: ``file://`` search-path entries, then
    ``conf_dir`` (a ``pkg://`` entry has no folder to name)."""
    return [Path(e.partition("://")[2] or e) for e in searchpath
            if e.startswith("file://") or "://" not in e] + [conf_dir]


def validation_problem(exc: BaseException, dirs: list[Path]) -> str | None:
    """The file, line, key, value and expected type of a composition's validation error,
    or None when ``exc`` is not one (a bad override on the command line says its own)."""
    causes = list(chain(exc))
    where = next((e for e in causes if isinstance(e, ConfigCompositionException)), None)
    error = next((e for e in causes if isinstance(e, OmegaConfBaseException)
                  and getattr(e, "full_key", None)), None)
    match = re.match(r"In '([^']+)'", str(where)) if where is not None else None
    if match is None or error is None:
        return None
    config = match.group(1)  # "hardware/mine", or "sweep" for the primary config
    path = next((d / f"{config}.yaml" for d in dirs if (d / f"{config}.yaml").is_file()),
                Path(f"{config}.yaml"))
    full_key, key = str(error.full_key), str(error.key)
    section = error.object_type if dataclasses.is_dataclass(error.object_type) else None
    if section is None:
        return None
    line = _line_of(path, full_key, group=config.split("/")[0])
    at = f"{path}, line {line}" if line else str(path)
    hints = typing.get_type_hints(section)
    if isinstance(error, ConfigKeyError) or key not in hints:
        return (f"{at}: {full_key} is not a key of {full_key.rpartition('.')[0] or 'the config'}"
                f"; its keys are {', '.join(hints)} (check the spelling)")
    example = _default(section, key)
    return (f"{at}: {full_key}: {getattr(error, 'value', None)!r} is not "
            f"{expected(hints[key])}"
            + (f"; write e.g. '{key}: {example}' (the default)" if example is not None
               else "; fix the value in the file"))


def expected(hint: typing.Any) -> str:
    """What a field of type ``hint`` takes, in words."""
    args = typing.get_args(hint)
    if type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return f"{expected(inner)} or null"
    origin = typing.get_origin(hint) or hint
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in hint)
    words = {bool: "true or false", int: "a whole number", float: "a number",
             str: "a string", dict: "a mapping", list: "a list"}
    if origin in words:
        return words[origin]
    if dataclasses.is_dataclass(hint):
        return "a mapping (a section of its own)"
    return f"a {getattr(hint, '__name__', hint)}"


def _default(section: type, key: str) -> str | None:
    field = next(f for f in dataclasses.fields(section) if f.name == key)
    value = field.default
    if value is dataclasses.MISSING or value is MISSING or value is None:
        return None
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _line_of(path: Path, full_key: str, *, group: str) -> int | None:
    """The line of ``full_key`` in the YAML file (its keys sit under ``group``, unless it
    is written at the top), or None when it cannot be found."""
    try:
        node = yaml.compose(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    parts = full_key.split(".")
    for keys in (parts[1:] if parts[0] == group else None, parts):
        found = _find(node, keys) if keys else None
        if found is not None:
            return found
    return None


def _find(node: yaml.Node | None, keys: list[str]) -> int | None:
    for depth, key in enumerate(keys):
        if not isinstance(node, yaml.MappingNode):
            return None
        entry = next(((k, v) for k, v in node.value if k.value == key), None)
        if entry is None:
            return None
        if depth == len(keys) - 1:
            return entry[0].start_mark.line + 1
        node = entry[1]
    return None


def chain(exc: BaseException | None):
    """The exception and its causes, outermost first."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
