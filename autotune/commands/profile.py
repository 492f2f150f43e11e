"""``python -m autotune profile``: one configuration under mindspore.profiler.

    python -m autotune profile                           # the study's pick
    python -m autotune profile profile.trial=0           # a completed trial of the study
    python -m autotune profile workload=gpt_tiny precision=fp16   # the composed config

Without ``profile.trial`` it profiles the study's pick (what export and soak take), or,
when an override sets the trial configuration to something the pick does not have
(``precision=fp16`` on an fp32 pick) or there is no study yet, the composed configuration.
The overrides a study of your own model needs on every command (``workload.entry=``,
``workload.name=``) are the pick's own, so they select the pick.

The trial program measures as usual, then profiles ``profile.steps`` more steps
(trials/profiling.py), so the profiler's cost is in no measured number. This
prints and writes, into ``profile.out`` (default <runs_dir>/<study>/profile/<name>):
the step split, the top 10 operators, the memory curve, the diagnosis
(autotune/profiling/rules.py), ``profile.png``, ``profile.json``, the Chrome trace
``trace.json`` and the profiler's raw output ``raw/`` (MindStudio Insight). A
profile of a study's trial is stored on the study (``autotune.profile``), where the
report shows it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
from omegaconf import DictConfig
from rich.console import Console

from autotune.profiling.profile import profile_config, show, store, write_result
from autotune.running.preflight import check_configs
from autotune.running.runner import runner_for
from autotune.settings import ProfileSettings, SweepConfig, SweepSettings
from autotune.study import storage as S
from autotune.study.choice import study_verdict
from autotune.study.layout import StudyLayout, sqlite_path
from autotune.study.records import TrialRecord, load_records
from trials.contract.schema import ConfigError, TrialConfig, to_trial_config
from trials.contract.trial_dir import TrialDir

#: The top-level sections of a trial's configuration: an override of one of them asks for a
#: profile of the composed configuration rather than of the study's pick.
TRIAL_SECTIONS = frozenset(f.name for f in dataclasses.fields(TrialConfig))


def trial_overrides(overrides: list[str]) -> list[str]:
    """The overrides that set the trial's configuration (``precision=fp16``,
    ``train.micro_batches=2``), not the orchestrator's (``sweep.study=x``, ``profile.steps``)."""
    return [o for o in overrides if "=" in o
            and o.split("=", 1)[0].lstrip("+~").split(".", 1)[0] in TRIAL_SECTIONS]


def run_profile(composed: DictConfig, console: Console, config: SweepConfig,
                overrides: list[str] = ()) -> int:
    settings: SweepSettings = config.sweep
    options: ProfileSettings = config.profile
    study, record = None, None
    if options.trial is not None:
        study = S.load_existing(settings)
        record = _trial(load_records(study), options.trial)
        _refuse_what_the_trial_lacks(record, composed, trial_overrides(overrides))
    elif (study := (S.load_existing(settings) if _names_a_study(overrides)
                    else _existing_study(settings))) is not None:
        record = study_verdict(load_records(study), composed).pick
        if record is not None and _not_run(record, composed, trial_overrides(overrides)):
            record = None  # an override the pick lacks asks for the composed configuration
        if record is not None:
            console.print(f"profiling the study's pick (what export and soak take): trial "
                          f"{record.number}; profile.trial=N profiles another", markup=False,
                          soft_wrap=True)
    if options.trial is not None and not record.run_dir.has_config():
        raise ConfigError(f"profile.trial={options.trial}: its run directory "
                          f"({record.trial_dir}) has no config.yaml to re-run")
    if record is not None and record.run_dir is not None and record.run_dir.has_config():
        cfg = record.run_dir.read_config()
        label = f"trial {record.number}"
    else:
        study, record = None, None
        cfg = to_trial_config(composed)
        label = "composed: " + (" ".join(trial_overrides(overrides)) or "the defaults")
    check_configs([cfg], settings)
    out = (Path(options.out) if options.out else
           StudyLayout.of(settings).profile(record.number if record else None,
                                            trial_overrides(overrides)))
    _check_out(out)
    result = profile_config(runner_for(settings), cfg, out, settings, options.steps,
                            console=console, trial=record.number if record else None,
                            label=label)
    if result is None:
        return 1
    write_result(result)
    if study is not None:
        store(study, record.number, result)
    show(result, console)
    return 0


def _not_run(record: TrialRecord, composed: DictConfig, overrides: list[str]) -> list[str]:
    """The trial overrides the trial did not run with (none: it ran with what each sets,
    as ``workload.entry=x`` on a study of workload x): the value at its path, a config
    group's whole section, differs in its config from the composed one. A trial without a
    config to compare ran none of them."""
    if not overrides:
        return []
    if record.run_dir is None or not record.run_dir.has_config():
        return list(overrides)
    ran, wanted = record.run_dir.read_config(), to_trial_config(composed)
    missing = []
    for override in overrides:
        here, there = ran, wanted
        for part in override.split("=", 1)[0].lstrip("+~").split("."):
            here, there = getattr(here, part, None), getattr(there, part, None)
        if here != there:
            missing.append(override)
    return missing


def _refuse_what_the_trial_lacks(record: TrialRecord, composed: DictConfig,
                                 overrides: list[str]) -> None:
    """``profile.trial=N`` re-runs the trial as it ran: an override that sets it to
    something else (``precision=fp16`` on an fp32 trial) would be dropped without a word,
    so it is refused with the two ways to get what was asked."""
    missing = _not_run(record, composed, overrides)
    if missing:
        raise ConfigError(f"profile.trial={record.number} profiles the trial as it ran, "
                          f"and {missing[0]} is not what it ran: drop {missing[0]}, or drop "
                          "profile.trial to profile the composed configuration")


def _names_a_study(overrides: list[str]) -> bool:
    """Whether the command names its study (``sweep.study=``, ``sweep.storage=``): then the
    study must exist. A misspelt name profiled the composed configuration without a word."""
    return any(o.split("=", 1)[0].lstrip("+~") in ("sweep.study", "sweep.storage")
               for o in overrides)


def _existing_study(settings: SweepSettings) -> optuna.Study | None:
    """The study when it exists; None when there is none yet (a fresh checkout). A storage
    that fails for any other reason still fails, with its one line."""
    url = S.storage_url(settings)
    db = sqlite_path(url)
    if db is not None and not db.exists():
        return None
    try:
        return optuna.load_study(study_name=settings.study,
                                 storage=S.open_storage(settings, create=False))
    except KeyError:
        return None


def _check_out(out: Path) -> None:
    """A profile runs in a directory of its own: a new run there empties it first, so a
    directory holding anything but an earlier run is refused."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"profile.out={out} is a file: choose a directory")
    if out.is_dir() and any(out.iterdir()) and not TrialDir(out).has_config():
        raise ConfigError(f"profile.out={out} holds other files: choose a new or empty "
                          "profile.out=DIR (a profile empties its directory first)")


def _trial(records: list[TrialRecord], number: int) -> TrialRecord:
    found = next((r for r in records if r.number == number), None)
    if found is None or not found.ok or not found.trial_dir:
        ok = ", ".join(str(r.number) for r in records if r.ok and r.trial_dir) or "none"
        raise ConfigError(f"profile.trial={number} is not a completed trial of this study "
                          f"(completed: {ok}); choose one of them")
    return found


#: What ``autotune`` says when it is stopped during a profile: nothing of it is kept.
STOPPED = "the profile run was killed: run the same command again to profile from the start"


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_profile(composed, console, config, overrides)
