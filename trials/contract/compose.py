"""Compose ``conf/`` with Hydra's compose API; every failure becomes one line.

Shared by the trial program and the orchestrator (plain Python, no MindSpore).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import re
import typing
from collections.abc import Callable
from pathlib import Path

import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from trials.contract.config_files import chain, config_dirs, validation_problem
from trials.contract.schema import CONF_DIR, ConfigError, TrialConfig
from trials.contract.vocabulary import LEGACY_RECOMPUTE, expand_override

ConfigStore.instance().store(name="trial_schema", node=TrialConfig)


def yaml_problem(exc: BaseException) -> str | None:
    """A YAML syntax error anywhere in the chain, as one line with its file, line and
    column (PyYAML's own text is four lines and leads with the parser's state)."""
    error = next((e for e in chain(exc) if isinstance(e, yaml.MarkedYAMLError)), None)
    if error is None:
        return None
    mark = error.context_mark or error.problem_mark
    if mark is None:
        return f"YAML syntax error: {error.problem or error}; fix the file"
    text = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}: YAML syntax error"
    if error.context:
        text += f" {error.context}"
    if error.problem:
        text += f": {error.problem}"
        if error.problem_mark is not None and error.problem_mark is not mark:
            text += (f" (at line {error.problem_mark.line + 1}, column "
                     f"{error.problem_mark.column + 1})")
    return text + "; fix the file's syntax"


#: Keys a config written by an earlier version may hold and this schema no longer has,
#: with what replaced them: a file loaded back drops them (a study's trials stay readable),
#: and an override that names one is told why it is gone rather than to check its spelling.
RETIRED_KEYS = {
    "hardware.cost.score_element_s": "the attention scores are memory-bound work charged at "
                                     "hardware.memory_bandwidth_gbs",
}


#: OmegaConf's names of a field's type, as the fix says them.
_TYPE_WORDS = {"Integer": "a whole number", "Float": "a number", "Boolean": "true or false",
               "bool": "true or false", "String": "a string"}


def _accepts_null(exc: BaseException) -> bool:
    """Whether the field an OmegaConf validation error (in ``exc``'s causes) names is
    Optional in its dataclass: its fix then names null beside the type's values."""
    cause = exc
    while cause is not None:
        owner, key = getattr(cause, "object_type", None), getattr(cause, "key", None)
        if dataclasses.is_dataclass(owner) and isinstance(key, str):
            hint = typing.get_type_hints(owner).get(key)
            return type(None) in typing.get_args(hint)
        cause = cause.__cause__
    return False


def one_line(exc: BaseException, nearest: Callable[[str], str | None] | None = None) -> str:
    """The useful first line of a Hydra/OmegaConf error (detail may sit in __cause__);
    ``nearest`` names the existing key closest to an unknown one (compose passes it)."""
    problem = yaml_problem(exc)
    if problem:
        return problem
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    # Hydra names the primary config ("In 'sweep': ..."), which every command composes.
    text = re.sub(r"^In '[\w.-]+': ", "", text)
    cause = exc.__cause__
    bare = re.fullmatch(r"Error parsing override '([^'=]+)'", text)
    if bare:  # a key with no value: Hydra names no fix
        text = (f"override '{bare.group(1)}' has no value: write KEY=VALUE, e.g. "
                f"{bare.group(1)}=... (--print-config shows its current value)")
    elif cause is not None and str(cause).strip() and text.startswith("Error merging override"):
        text = f"{text}: {str(cause).strip().splitlines()[0]}"
        wanted = re.search(r"(?:could not be converted to|is not a valid) (\w+)", text)
        if wanted and wanted.group(1) in _TYPE_WORDS:
            key = text.removeprefix("Error merging override ").partition("=")[0]
            text += f"; give {key} {_TYPE_WORDS[wanted.group(1)]}"
            if _accepts_null(exc):
                text += ", or null"
    elif text.startswith("Could not override") or text.endswith("is not in struct"):
        # Hydra's unknown key (a composed config) and OmegaConf's (a loaded file, as an
        # exported job's launch.sh loads its config): one fix.
        key = text.partition("'")[2].partition("'")[0]
        full = re.search(r"full_key: (\S+)", str(exc))
        key = full.group(1) if full and text.endswith("is not in struct") else key
        near = nearest(key) if nearest and key not in RETIRED_KEYS else None
        text += (f" It was retired: {RETIRED_KEYS[key]}; drop it." if key in RETIRED_KEYS
                 else f" No such key ({key}): check its spelling"
                      + (f": did you mean {near}?" if near else "")
                      + " (--print-config lists every key).")
    else:
        # Hydra lists the group's options one per line after "Available options in 'g':".
        for i, line in enumerate(lines):
            if line.startswith("Available options"):
                names = []
                for option in lines[i + 1:]:
                    if option.startswith("Config search path") or ":" in option:
                        break
                    names.append(option)
                text = f"{text.rstrip('.')}. {line} {', '.join(names)}."
                break
    return text


def compose(config_name: str, overrides: list[str], conf_dir: Path = CONF_DIR, *,
            with_choices: bool = False, schema: type = TrialConfig) -> DictConfig:
    """Compose ``config_name`` with Hydra overrides; raise ConfigError on any problem.

    ``with_choices`` keeps the ``hydra`` node, whose ``runtime.choices`` says which
    option each config group took. The result is checked against ``schema`` once
    more, because Hydra's ``+key=value`` adds keys the schema does not know.
    """
    overrides = [_shaped_override(o, schema)
                 for override in overrides for o in expand_override(override)]
    parsed = _parsed(overrides)
    check_searchpath(parsed)
    try:
        cfg = _hydra_compose(config_name, overrides, conf_dir, with_choices)
    except Exception as exc:  # Hydra raises several unrelated types for bad input
        shape = syntax_problem(overrides)
        if not shape and any(isinstance(e, OmegaConfBaseException) for e in chain(exc)):
            shape = (group_file_problem(parsed, conf_dir, schema)
                     or validation_problem(exc, config_dirs(_searchpath(parsed), conf_dir)))
        nearest = functools.partial(_nearest_key, config_name, overrides, conf_dir)
        raise ConfigError(shape or one_line(exc, nearest)) from exc
    check_known_keys(cfg, schema)
    return cfg


def _hydra_compose(config_name: str, overrides: list[str], conf_dir: Path,
                   with_choices: bool = False) -> DictConfig:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=overrides,
                                 return_hydra_config=with_choices)
    finally:
        GlobalHydra.instance().clear()


def _nearest_key(config_name: str, overrides: list[str], conf_dir: Path,
                 key: str) -> str | None:
    """The existing key closest to ``key``, which does not exist
    (``hardware.peak_tflops.bfloat16`` for ``...bf16``): among its siblings in the config
    composed without the override that named it; None when none is close or that config
    does not compose either. Only an unknown key's error pays for the second compose."""
    parent, _, leaf = key.rpartition(".")
    rest = [o for o in overrides if o.lstrip("+~").partition("=")[0] != key]
    try:
        cfg = _hydra_compose(config_name, rest, conf_dir)
    except Exception:  # noqa: BLE001 - another override is wrong too: no suggestion
        return None
    node = OmegaConf.select(cfg, parent) if parent else cfg
    names = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    nearest = difflib.get_close_matches(leaf, names, n=1)
    return (f"{parent}.{nearest[0]}" if parent else nearest[0]) if nearest else None


SEARCHPATH = "hydra.searchpath"


def syntax_problem(overrides: list[str]) -> str | None:
    """The first override Hydra's grammar rejects, with the spelling it takes (a shell
    splits ``plan.split=[8x1x1 2x4x1]`` at the space into two overrides), or None."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except Exception as exc:  # noqa: BLE001 - Hydra's grammar errors have several types
            return (f"cannot parse the override {override!r} ({one_line(exc)}): write "
                    "key=value, a list as key=[a,b] with commas and no spaces, and quote "
                    "a value that holds a space or a bracket ('key=\"a b\"')")
    return None


def _parsed(overrides: list[str]) -> list:
    """Hydra's own parse of the overrides ([] when they do not parse: compose says why)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - a syntax error is Hydra's to report, in compose
        return []


def _searchpath(parsed: list) -> list[str]:
    entries = []
    for override in parsed:
        if override.key_or_group == SEARCHPATH:
            value = override.value()
            entries.extend(value if isinstance(value, list) else [value])
    return [str(e) for e in entries]


def check_searchpath(parsed: list) -> None:
    """Every ``hydra.searchpath`` entry must exist (Hydra only warns, in two lines, and goes
    on without it); ConfigError naming the entry."""
    for entry in _searchpath(parsed):
        scheme, sep, where = entry.partition("://")
        if not sep:
            scheme, where = "file", entry
        if scheme == "file" and not Path(where).is_dir():
            raise ConfigError(f"{SEARCHPATH}: {entry} is not a directory; point file:// at "
                              "the directory that holds your config groups (search/, "
                              "hardware/, ...)")
        if scheme == "pkg" and importlib.util.find_spec(where.split("/")[0]) is None:
            raise ConfigError(f"{SEARCHPATH}: {entry}: no such Python package; install it "
                              "or use file://DIR")


def group_file_problem(parsed: list, conf_dir: Path, schema: type) -> str | None:
    """What is wrongly shaped in a config-group file the overrides chose (a list where the
    schema wants a mapping, or the reverse), naming the file; None if none is found.
    Hydra's own error names neither the file nor the key."""
    dirs = config_dirs(_searchpath(parsed), conf_dir)
    hints = typing.get_type_hints(schema)
    for override in parsed:
        group, option = override.key_or_group, override.value()
        if group not in hints or not dataclasses.is_dataclass(hints[group]) \
                or not isinstance(option, str):
            continue
        for folder in dirs:
            path = folder / group / f"{option}.yaml"
            if path.is_file():
                problem = _shape_problem(path, group, hints[group])
                if problem:
                    return problem
                break
    return None


def _shape_problem(path: Path, group: str, section: type) -> str | None:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    hints = typing.get_type_hints(section)
    for key, value in data.items():
        hint = hints.get(key)
        origin = typing.get_origin(hint) or hint
        if value is None or hint is None:
            continue
        if (origin is dict or dataclasses.is_dataclass(hint)) and not isinstance(value, dict):
            return (f"{path}: {group}.{key} is a {type(value).__name__}; it must be a mapping "
                    f"(one 'name: value' line per entry, indented under {key}:)")
        if origin is list and not isinstance(value, list):
            return (f"{path}: {group}.{key} is a {type(value).__name__}; it must be a list "
                    "([a, b] or one '- item' line per entry)")
    return None


@functools.lru_cache(maxsize=None)
def shaped_paths(schema: type, shape: type, prefix: str = "") -> frozenset[str]:
    """Override paths of the schema's fields of ``shape``: ``dict`` (free-form:
    ``workload.options`` ...) or ``list`` (``plan.split``, ``plan.micro_batches`` ...)."""
    paths = set()
    for name, hint in typing.get_type_hints(schema).items():
        origin = typing.get_origin(hint) or hint
        if dataclasses.is_dataclass(hint):
            paths |= shaped_paths(hint, shape, f"{prefix}{name}.")
        elif origin is shape:
            paths.add(f"{prefix}{name}")
    return frozenset(paths)


def _shaped_override(override: str, schema: type) -> str:
    """An override of a dict or list field as Hydra needs it, as the user means it.

    - A free-form dict (``workload.options={width: 1024}``): Hydra merges a dict value into
      the existing node, which is read-only for new keys, so the plain form is refused;
      ``++`` (set or add) merges it.
    - A list given bare: ``plan.micro_batches=4`` is ``[4]``, ``plan.split=8x1x1,2x4x1``
      is ``[8x1x1,2x4x1]`` and an empty value the empty list (OmegaConf refuses a scalar
      for a list: "int is not a ListConfig"; Hydra reads a bare comma as a sweep).
    """
    key, sep, value = override.partition("=")
    if not sep or key.startswith(("~", "+")):
        return override
    text = value.strip()
    if key in shaped_paths(schema, dict) and text.startswith("{"):
        return f"++{override}"
    if key in shaped_paths(schema, list) and not text.startswith("[") and text != "null":
        return f"{key}=[{text}]"
    return override


def check_known_keys(cfg: DictConfig, schema: type) -> None:
    """ConfigError naming the first key (added with ``+``) that ``schema`` does not have."""
    node = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    try:
        # Plain containers: a typed node would carry its extra keys through the merge.
        OmegaConf.merge(OmegaConf.structured(schema),
                        OmegaConf.create(OmegaConf.to_container(node)))
    except Exception as exc:  # OmegaConf validation errors
        text = one_line(exc)
        key = getattr(exc, "full_key", None)
        if key and "not in" in text:
            text = (f"unknown key '{key}' (added with '+'?): it is not part of the schema; "
                    "check its spelling (--print-config lists every key)")
        raise ConfigError(text) from exc


def load_resolved(path: Path, overrides: list[str]) -> DictConfig:
    """Load a resolved config file (as written for a trial or an export) plus dotlist overrides.

    A file loaded back is untyped, so callers re-validate it against the schema. Files
    written before recompute had modes say ``train.recompute: true``; they read as ``full``;
    the ``RETIRED_KEYS`` they hold are dropped.
    """
    overrides = [o for override in overrides for o in expand_override(override)]
    try:
        cfg = OmegaConf.load(path)
        for key in RETIRED_KEYS:
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(cfg, parent)
            if isinstance(node, DictConfig) and leaf in node:
                node.pop(leaf)
        recompute = OmegaConf.select(cfg, "train.recompute")
        if isinstance(recompute, bool):
            cfg.train.recompute = LEGACY_RECOMPUTE[recompute]
        if overrides:
            OmegaConf.set_struct(cfg, True)
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(overrides)))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except Exception as exc:
        raise ConfigError(one_line(exc)) from exc
    assert isinstance(cfg, DictConfig)
    return cfg
