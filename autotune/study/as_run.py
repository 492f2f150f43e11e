"""A command that reads a stored study (report, export, confirm, soak, dashboard) reads it as
it was run: an override that would describe another run (``workload.n_layers=70`` on a study
run with 2 layers) changes nothing it reads, so it is refused, naming what the study ran
with, where a silent pass would let a reader take the printout, or the exported job, for
the run the override describes.

What a study ran with is its fingerprint's parts (autotune/study/schema/fingerprint.py: the
workload, the hardware profile, the data and the global batch, as a sweep stored them).
Only the sections an override names are compared, so the sweep's own overrides, given again
to find the same study, pass, and a bare ``report sweep.study=NAME`` needs none."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from omegaconf import DictConfig

from autotune.settings import SweepSettings
from autotune.study.schema.fingerprint import run_parts, stored_fingerprint
from autotune.study.storage import load_existing
from trials.contract.schema import ConfigError, to_trial_config

#: The sections of a run a stored study records, and where its fingerprint keeps each.
RECORDED = {"workload": ("workload",), "hardware": ("hardware",),
            "data": ("measurement", "data"), "train.global_batch": ("measurement", "global_batch")}


def contradicted(command: str, settings: SweepSettings, composed: DictConfig,
                 overrides: Sequence[str]) -> str | None:
    """The one line refusing an override that describes another run than the stored
    study's, or None (none given, no such study: the command says so itself, or a study
    stored before its parts were)."""
    named = [(section, o) for o in overrides for section in RECORDED
             if _key(o) == section or _key(o).startswith(section + ".")]
    if not named:
        return None
    try:
        study = load_existing(settings)
    except ConfigError:
        return None
    _, stored = stored_fingerprint(study)
    ran_parts = _plain(stored.to_json())
    now_parts = _plain(run_parts(to_trial_config(composed), simulated=settings.simulate))
    for section in dict.fromkeys(section for section, _ in named):
        ran = _at(ran_parts, RECORDED[section])
        if ran in (None, {}):
            continue  # stored before the study kept this part
        for key, was, given in _differences(section, ran, _at(now_parts, RECORDED[section])):
            # The override that set this key: its own, else the nearest above it (a group).
            override = max((o for s, o in named if s == section
                            and (key == _key(o) or key.startswith(_key(o) + "."))),
                           key=lambda o: len(_key(o)), default=None)
            if override is None:
                continue  # a default's difference, not an override's
            return (f"{command} reads study {settings.study!r} as it was run, with {key}={was}; "
                    f"{override} would describe another run (with {key}={given}) and change "
                    "nothing read: drop it, or name the study that ran with it "
                    "(sweep.study=NAME)")
    return None


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def _at(parts: dict, path: tuple[str, ...]):
    for key in path:
        parts = parts.get(key) if isinstance(parts, dict) else None
    return parts


def _plain(value):
    """As the fingerprint stored it: JSON, enums and paths as text."""
    return json.loads(json.dumps(value, default=str))


def _differences(prefix: str, ran, now) -> Iterator[tuple[str, object, object]]:
    """(dotted key, stored value, composed value) of every leaf that differs."""
    if isinstance(ran, dict) and isinstance(now, dict):
        for key in sorted(set(ran) | set(now)):
            yield from _differences(f"{prefix}.{key}", ran.get(key), now.get(key))
    elif ran != now:
        yield prefix, ran, now
