"""Compose ``conf/`` with Hydra's compose API; every failure becomes one line.

Shared by the trial program and the orchestrator (plain Python, no MindSpore).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from trials.contract.schema import CONF_DIR, ConfigError, TrialConfig
from trials.contract.vocabulary import LEGACY_RECOMPUTE, expand_override

ConfigStore.instance().store(name="trial_schema", node=TrialConfig)


def one_line(exc: BaseException) -> str:
    """The useful first line of a Hydra/OmegaConf error (detail may sit in __cause__)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause).strip() and text.startswith("Error merging override"):
        text = f"{text}: {str(cause).strip().splitlines()[0]}"
    elif text.startswith("Could not override"):
        text += " No such key: check its spelling (--print-config lists every key)."
    else:
        # Hydra lists the group's options one per line after "Available options in 'g':".
        for i, line in enumerate(lines):
            if line.startswith("Available options"):
                names = []
                for option in lines[i + 1:]:
                    if option.startswith("Config search path") or ":" in option:
                        break
                    names.append(option)
                text += f" {line} {', '.join(names)}."
                break
    return text


def compose(config_name: str, overrides: list[str], conf_dir: Path = CONF_DIR, *,
            with_choices: bool = False, schema: type = TrialConfig) -> DictConfig:
    """Compose ``config_name`` with Hydra overrides; raise ConfigError on any problem.

    ``with_choices`` keeps the ``hydra`` node, whose ``runtime.choices`` says which
    option each config group took. The result is checked against ``schema`` once
    more, because Hydra's ``+key=value`` adds keys the schema does not know.
    """
    GlobalHydra.instance().clear()
    overrides = [_dict_override(o, free_form_paths(schema))
                 for override in overrides for o in expand_override(override)]
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides,
                                return_hydra_config=with_choices)
    except Exception as exc:  # Hydra raises several unrelated types for bad input
        raise ConfigError(one_line(exc)) from exc
    finally:
        GlobalHydra.instance().clear()
    check_known_keys(cfg, schema)
    return cfg


@functools.lru_cache(maxsize=None)
def free_form_paths(schema: type, prefix: str = "") -> frozenset[str]:
    """Override paths of the schema's free-form dict fields (``workload.options`` ...)."""
    paths = set()
    for name, hint in typing.get_type_hints(schema).items():
        origin = typing.get_origin(hint) or hint
        if dataclasses.is_dataclass(hint):
            paths |= free_form_paths(hint, f"{prefix}{name}.")
        elif origin is dict:
            paths.add(f"{prefix}{name}")
    return frozenset(paths)


def _dict_override(override: str, free_form: frozenset[str]) -> str:
    """``workload.options={width: 1024}`` as Hydra needs it for a free-form dict.

    Hydra merges a dict value into the existing node, which is read-only for new keys,
    so the plain form is refused; ``++`` (set or add) merges it as the user means.
    """
    key, sep, value = override.partition("=")
    if sep and key in free_form and value.lstrip().startswith("{"):
        return f"++{override}"
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
    written before recompute had modes say ``train.recompute: true``; they read as ``full``.
    """
    overrides = [o for override in overrides for o in expand_override(override)]
    try:
        cfg = OmegaConf.load(path)
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
