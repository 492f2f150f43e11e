"""``python -m autotune profile``: one configuration under mindspore.profiler.

    python -m autotune profile profile.trial=3           # a trial of the study
    python -m autotune profile workload=gpt_tiny precision=fp16   # the composed config

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

from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.profiling.profile import profile_config, show, store, write_result
from autotune.running.runner import runner_for
from autotune.settings import ProfileSettings, SweepSettings
from autotune.study import storage as S
from autotune.study.layout import StudyLayout
from autotune.study.records import TrialRecord, load_records
from trials.contract.schema import ConfigError, runnable_problem, to_trial_config
from trials.contract.trial_dir import TrialDir


def run_profile(composed: DictConfig, console: Console) -> int:
    settings: SweepSettings = OmegaConf.to_object(composed.sweep)
    options: ProfileSettings = OmegaConf.to_object(composed.profile)
    study, record = None, None
    if options.trial is not None:
        study = S.load_existing(settings)
        record = _trial(load_records(study), options.trial)
        cfg = record.run_dir.read_config()
    else:
        cfg = to_trial_config(composed)
    problem = runnable_problem(cfg)
    if problem:
        raise ConfigError(problem)
    out = (Path(options.out) if options.out else
           StudyLayout.of(settings).profile(record.number if record else None))
    _check_out(out)
    result = profile_config(runner_for(settings), cfg, out, settings, options.steps,
                            console=console)
    if result is None:
        return 1
    write_result(result)
    if study is not None:
        store(study, record.number, result)
    show(result, console)
    return 0


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


def run(composed: DictConfig, overrides: list[str], console: Console) -> int:
    return run_profile(composed, console)
