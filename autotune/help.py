"""``python -m autotune COMMAND --help``: the command's own page, in plain text.

The page is the command module's docstring (what it does, its example lines) and the
settings it reads, each with its default and the ``#:`` comment written above the field in
:mod:`autotune.settings`: the one place a setting's meaning is written, read here rather
than copied.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import re
import textwrap
import typing

from autotune import settings as S

#: The settings group each command reads (the rest of the composed config: the trial's).
GROUP = {"calibrate-host": None}


def plain(text: str) -> str:
    """A docstring as a terminal shows it: reStructuredText's ``literal`` marks (across a
    line break too) and its roles (``:mod:`x```) dropped."""
    text = re.sub(r":[a-z]+:`~?(.+?)`", r"\1", text)
    return re.sub(r"``(.+?)``", r"\1", text, flags=re.S)


def field_notes(cls: type) -> dict[str, str]:
    """Each field's ``#:`` comment (the lines just above it), joined into one sentence."""
    notes: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        name = re.match(r"(\w+)\s*:", stripped)
        if name and pending:
            notes[name.group(1)] = " ".join(pending)
        pending = [] if not stripped.startswith("#") else pending
    return notes


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    return value.value if isinstance(value, enum.Enum) else value


def _hydra(value) -> str:
    """A default as it is written on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return "''" if value == "" else str(value)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row of a command's settings table: what ``--help`` prints and the reference shows."""

    key: str
    type: str
    default: str
    range: str
    meaning: str


def _type_name(kind) -> str:
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in kind)
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if args and len(args) < len(typing.get_args(kind)):  # Optional[X]
        return f"{_type_name(args[0])} or null"
    return getattr(kind, "__name__", str(kind))


def _range(f: dataclasses.Field) -> str:
    spec = f.metadata.get("autotune.rule", {})
    if "one_of" in spec:
        return "one of " + ", ".join(map(str, spec["one_of"]))
    if "path" in spec:
        return f"path: {spec['path']}"
    signs = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
    return " and ".join(f"{sign} {spec[k]:g}" for k, sign in signs if k in spec)


def settings_rows(cls: type, prefix: str) -> list[Setting]:
    """Every field of a settings group, nested groups expanded: the one settings table."""
    notes, hints = field_notes(cls), typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        value = _default(f)
        if dataclasses.is_dataclass(value):
            rows += settings_rows(type(value), f"{prefix}.{f.name}")
            continue
        rows.append(Setting(f"{prefix}.{f.name}", _type_name(hints[f.name]), _hydra(value),
                            _range(f), plain(notes.get(f.name, ""))))
    return rows


def settings_lines(rows: list[Setting]) -> list[str]:
    """``prefix.name=default  what it means`` for every row of a settings table."""
    lines = []
    for row in rows:
        lines.append(f"  {row.key}={row.default}")
        if row.meaning:
            lines += textwrap.wrap(row.meaning, 92, initial_indent=" " * 6,
                                   subsequent_indent=" " * 6)
    return lines


def command_module(verb: str) -> str:
    """The module that runs a verb (a hyphen in the verb is an underscore in its name)."""
    return f"autotune.commands.{verb.replace('-', '_')}"


def command_text(verb: str) -> str:
    """What a verb does and its examples: its module's docstring, as a terminal shows it."""
    return plain(inspect.cleandoc(importlib.import_module(command_module(verb)).__doc__ or ""))


def command_settings(verb: str) -> tuple[str | None, list[Setting]]:
    """The settings group a verb reads (None: only the trial's) and its rows."""
    group = GROUP.get(verb, verb)
    if group is None:
        return None, []
    return group, settings_rows(type(getattr(S.SweepConfig(), group)), group)


def command_help(verb: str) -> str:
    """The whole page of ``python -m autotune <verb> --help``."""
    page = [f"usage: python -m autotune {verb} [--print-config] [-v] [overrides ...]", "",
            command_text(verb), ""]
    group, rows = command_settings(verb)
    if group is not None:
        page += [f"Its settings ({group}.KEY=VALUE on the command line; defaults shown):",
                 *settings_lines(rows), ""]
    page += textwrap.wrap(
        "Every command also takes the trial's overrides (workload=, hardware=, precision=, "
        "parallel.*, train.*, data.*, run.*) and the study's (sweep.study=, sweep.storage=, "
        f"sweep.runs_dir=), so that each finds the same study; python -m autotune {verb} "
        "--print-config prints them all, composed.", 92)
    return "\n".join(page) + "\n"
