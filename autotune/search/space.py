"""The search space as data: knobs (override paths) and the values to explore.

A knob is either a config group (``precision: [fp32, fp16]``), a typed field
(``train.micro_batches: [1, 2, 4]``), or ``parallel.split``: one categorical
over "dp x mp x pp" strings, because the three are dependent. Each sampled
point turns into Hydra overrides, composed exactly like the user's own.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import typing
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf
from optuna.distributions import CategoricalDistribution

from autotune.settings import Launcher, SearchConfig, SweepConfig, SweepSettings
from autotune.study.schema.fingerprint import run_parts
from trials.contract.compose import compose, one_line
from trials.contract.rules import check_fields, path_problem
from trials.contract.schema import (
    CONF_DIR,
    TRIAL_KEYS,
    ConfigError,
    TrialConfig,
    as_field,
    to_trial_config,
    validate,
)
from trials.contract.vocabulary import PRECISIONS, DType, old_spelling, split_overrides

SPLIT = "parallel.split"
PRECISION = "precision"


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Knob:
    path: str
    choices: tuple
    is_group: bool

    def overrides(self, value: Any) -> list[str]:
        if self.path == SPLIT:
            return split_overrides(value)
        return [f"{self.path}={format_value(value)}"]


def space_file(name: str) -> str:
    """Where search space ``name`` is defined, as a message names it: shipped under conf/,
    or a user's own under a ``hydra.searchpath`` directory."""
    return f"search/{name}.yaml (in conf/, or in a hydra.searchpath directory of yours)"


class SearchSpace:
    """Knobs plus the baseline point (the workload's default configuration)."""

    def __init__(self, knobs: list[Knob], baseline: dict[str, Any], devices: int | None,
                 base_overrides: list[str]) -> None:
        self.knobs = knobs
        self.baseline = baseline
        self.devices = devices
        #: Nodes one job may span (the SLURM launcher's sweep.slurm.max_nodes; else 1).
        self.nodes = 1
        self.base_overrides = list(base_overrides)
        self._cache: dict[tuple[str, ...], DictConfig] = {}
        #: Each point's config or the error it raised: the seeding filter asks for every
        #: point of the space at each proposal until the model seeds (0.2 s a point).
        self._built: dict[tuple, TrialConfig | ConfigError] = {}

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_config(cls, search: SearchConfig, base: DictConfig,
                    base_overrides: list[str]) -> SearchSpace:
        """Build and check the space; ``base`` is the composed sweep config (with choices)."""
        raw = OmegaConf.to_container(search.knobs) if isinstance(search.knobs, DictConfig) \
            else dict(search.knobs)
        if not raw:
            raise ConfigError(f"search space {search.name!r} has no knobs: list some under "
                              f"knobs: in {space_file(search.name)}")
        choices = base.hydra.runtime.choices if "hydra" in base else {}
        knobs, baseline = [], {}
        for path, values in raw.items():
            if not isinstance(values, list) or not values:
                raise ConfigError(f"search knob {path!r} needs a non-empty list of values")
            is_group = (CONF_DIR / path).is_dir()
            settings = [_setting(path, v, is_group) for v in values]
            _check_knob(path, values, settings)
            _check_spelling(path, [*values, *([search.baseline[path]]
                                                if path in search.baseline else [])])
            current = _current_value(path, base, choices, is_group)
            if path in search.baseline:
                current = search.baseline[path]
            values = list(values)
            same = [v for v, setting in zip(values, settings)
                    if setting == _setting(path, current, is_group)]
            if same:  # the baseline as the space writes it ("2" where the config reads 2)
                current = same[0]
            else:  # the baseline must be a point of the space
                values.insert(0, current)
            knobs.append(Knob(path, tuple(values), is_group))
            baseline[path] = current
        unknown = sorted(set(search.baseline) - set(raw))
        if unknown:
            raise ConfigError(f"search.baseline names {unknown}, which are not knobs of search "
                              f"space {search.name!r}")
        space = cls(knobs, baseline, search.devices, base_overrides)
        space._check_values()
        return space

    def _check_values(self) -> None:
        """Every value must compose and keep its field's rule (the schema's own range: a
        value outside it would only fail as an infeasible trial): an unknown group
        option, a bad type or a value out of range fails now."""
        for knob in self.knobs:
            for value in knob.choices:
                problem = None
                try:
                    if knob.is_group:
                        cfg = to_trial_config(self._composed((*knob.overrides(value),)))
                        if knob.path in TRIAL_KEYS:  # the section the group option fills
                            check_fields(getattr(cfg, knob.path), knob.path)
                    else:
                        merged = _merge_fields(self._composed(()), knob.overrides(value))
                        problem = _rule_problem(merged, knob)
                except ConfigError as exc:
                    raise ConfigError(f"search knob {knob.path}={format_value(value)}: {exc}") \
                        from exc
                if problem:
                    raise ConfigError(f"search knob {knob.path}={format_value(value)} {problem}")

    def _composed(self, group_overrides: tuple[str, ...]) -> DictConfig:
        """Hydra composition for one choice of the config groups (cached: ~70 ms each)."""
        if group_overrides not in self._cache:
            self._cache[group_overrides] = compose("sweep",
                                                   self.base_overrides + list(group_overrides),
                                                   schema=SweepConfig)
        return self._cache[group_overrides]

    # -- use ------------------------------------------------------------------------------
    def distributions(self) -> dict[str, CategoricalDistribution]:
        return {k.path: CategoricalDistribution(list(k.choices)) for k in self.knobs}

    def overrides(self, params: dict[str, Any]) -> list[str]:
        out = list(self.base_overrides)
        for knob in self.knobs:
            out.extend(knob.overrides(params[knob.path]))
        return out

    def trial_config(self, params: dict[str, Any]) -> TrialConfig:
        """The resolved trial config of a point. Raises ConfigError for an impossible one.

        Config groups are composed by Hydra (once per combination); field knobs are then
        merged into the typed config, which checks them exactly as an override would.
        """
        key = tuple((k.path, repr(params[k.path])) for k in self.knobs)
        if key not in self._built:
            groups = tuple(o for k in self.knobs if k.is_group
                           for o in k.overrides(params[k.path]))
            fields = [o for k in self.knobs if not k.is_group
                      for o in k.overrides(params[k.path])]
            try:
                cfg = to_trial_config(_merge_fields(self._composed(groups), fields))
                validate(cfg)
                self._built[key] = cfg
            except ConfigError as exc:
                self._built[key] = exc
        built = self._built[key]
        if isinstance(built, ConfigError):
            raise built.with_traceback(None)
        return copy.deepcopy(built)  # callers may change theirs; the cached one stays

    @property
    def size(self) -> int:
        return math.prod(len(k.choices) for k in self.knobs)

    def points(self) -> list[dict[str, Any]]:
        """Every point of the space (the product of the knobs' values)."""
        import itertools

        paths = [k.path for k in self.knobs]
        return [dict(zip(paths, values))
                for values in itertools.product(*(k.choices for k in self.knobs))]

    def neighbours(self, *, first: Collection[str] = (),
                   last: Collection[str] = ()) -> list[dict[str, Any]]:
        """One-knob-at-a-time changes of the baseline, in knob order, the knobs named in
        ``first`` before the others and those in ``last`` after them (a data-bound
        baseline's data knobs first; one whose pipeline keeps up, its data knobs last)."""
        out = []
        rank = {path: 0 for path in first} | {path: 2 for path in last if path not in first}
        for knob in sorted(self.knobs, key=lambda k: rank.get(k.path, 1)):
            for value in knob.choices:
                if value != self.baseline[knob.path]:
                    out.append({**self.baseline, knob.path: value})
        return out

    def dtypes(self, base: TrialConfig) -> list[DType]:
        """The compute dtypes its points train in: its precision knob's, else the base's."""
        knob = next((k for k in self.knobs if k.path == PRECISION), None)
        if knob is None:
            return [base.precision.dtype]
        return list(dict.fromkeys(PRECISIONS[v] for v in knob.choices if v in PRECISIONS))

    def describe(self) -> dict[str, list]:
        return {k.path: list(k.choices) for k in self.knobs}


def _check_knob(path: str, values: list, settings: list) -> None:
    """A knob is a setting of the trial (a path into TrialConfig, read from its dataclasses:
    the sweep's own settings, such as its budget, are not tuned) with distinct values."""
    problem = trial_path_problem(path)
    if problem:
        raise ConfigError(f"search knob {path!r} {problem}")
    seen: list = []
    for value, setting in zip(values, settings):
        # Values the field reads alike (``settings``: "2" and 2) are one point of the
        # space: measured twice, and told to Optuna as two.
        if setting in seen:
            raise ConfigError(f"search knob {path!r} lists {format_value(value)} twice; "
                              "list each value once")
        seen.append(setting)


def _setting(path: str, value: Any, is_group: bool) -> Any:
    """What ``value`` sets: a group's option as written, a field's value as it reads it."""
    return value if is_group else as_field(path, value)


def trial_path_problem(path: str) -> str | None:
    """Why ``path`` names no tunable setting of the trial, or None: a config group of the
    trial (``precision``), a field under one of its sections (``train.micro_batches``,
    ``workload.options.width`` in a free-form dict) or ``parallel.split``."""
    if path == SPLIT:
        return None
    schema: type = TrialConfig
    parts = path.split(".")
    for depth, part in enumerate(parts):
        hints = typing.get_type_hints(schema)
        where = ".".join(parts[:depth])
        if part not in hints:
            if depth == 0:
                whose = ("a setting of the sweep, not of the trial"
                         if part in typing.get_type_hints(SweepConfig)
                         else "not a setting of the trial")
                return (f"is {whose}: knobs tune the trial's sections "
                        f"({', '.join(TRIAL_KEYS)}), e.g. train.micro_batches or precision")
            return (f"is not a field of {where}: its fields are {', '.join(hints)} "
                    "(--print-config lists every key)")
        hint = hints[part]
        if dataclasses.is_dataclass(hint):
            schema = hint
            continue
        if depth < len(parts) - 1 and (typing.get_origin(hint) or hint) is not dict:
            return f"goes below {'.'.join(parts[:depth + 1])}, which is a value"
        return None
    if len(parts) == 1 and (CONF_DIR / path).is_dir():
        return None  # a config group: its options are the values
    fields = ", ".join(typing.get_type_hints(schema))
    return f"is a section, not a value: name a field in it ({fields})"


def _check_spelling(path: str, values: list) -> None:
    """Knob values in the commands' vocabulary: ``train.recompute: [none, full]``."""
    for value in values:
        problem = old_spelling(path, value, where=f"search knob {path}")
        if problem:
            raise ConfigError(problem)


def _rule_problem(merged: DictConfig, knob: Knob) -> str | None:
    """How a field knob's merged value breaks its field's declared rule, or None (a split
    sets three fields: the one that breaks is named)."""
    for override in knob.overrides(knob.choices[0]):
        path = override.partition("=")[0]
        value = OmegaConf.select(merged, path)
        problem = path_problem(SweepConfig, path, value)
        if problem:
            return problem if path == knob.path else f"({path}={value} {problem})"
    return None


def _merge_fields(node: DictConfig, overrides: list[str]) -> DictConfig:
    """``key=value`` overrides merged into a composed (typed, struct) config."""
    try:
        return OmegaConf.merge(node, OmegaConf.from_dotlist(overrides))
    except Exception as exc:  # OmegaConf validation errors
        raise ConfigError(one_line(exc)) from exc


def _current_value(path: str, base: DictConfig, choices, is_group: bool) -> Any:
    if path == SPLIT:
        return to_trial_config(base).parallel.split
    if is_group:
        if path not in choices:
            raise ConfigError(f"search knob {path!r} is a config group the sweep does not use")
        return choices[path]
    value = OmegaConf.select(base, path, default=_MISSING)
    if value is _MISSING:
        raise ConfigError(f"search knob {path!r} is not a config key or group; check its spelling")
    if isinstance(value, (DictConfig, list)) or OmegaConf.is_config(value):
        raise ConfigError(f"search knob {path!r} is a section, not a value; name a field in it")
    return value.value if hasattr(value, "value") else value


_MISSING = object()


def fingerprint_parts(space: SearchSpace, base: TrialConfig, *, simulated: bool) -> dict:
    """What makes a study the same study: its space, workload, hardware profile and the
    measurement protocol (a resume with other ones is refused)."""
    return {"search_space": space.describe(), "search_devices": space.devices,
            **run_parts(base, simulated=simulated)}


def check_devices(space: SearchSpace, base: TrialConfig, settings: SweepSettings) -> None:
    """Jobs and concurrent trials must fit the devices the launcher can give them (sets
    ``space.nodes``); ConfigError naming the fix otherwise."""
    hw = base.hardware
    slurm = settings.launcher is Launcher.slurm
    space.nodes = settings.slurm.max_nodes if slurm else 1
    job = space.devices or base.parallel.devices
    if job > hw.devices * space.nodes:
        where = (f"{space.nodes} node(s) of {hw.devices} devices" if slurm else
                 f"the hardware profile {hw.name!r} has {hw.devices} devices")
        fix = ("raise sweep.slurm.max_nodes" if slurm else
               "run on a cluster with sweep.launcher=slurm sweep.slurm.max_nodes=N")
        raise ConfigError(f"a job of {job} devices does not fit: {where}; lower "
                          f"search.devices / parallel.split, or {fix}")
    if not slurm and settings.parallel_trials > hw.devices:
        raise ConfigError(f"sweep.parallel_trials={settings.parallel_trials} trials side by "
                          f"side need at least as many devices, and the hardware profile "
                          f"{hw.name!r} has {hw.devices}: lower sweep.parallel_trials")
