"""Which trial a soak runs, for how many steps, where it kills and writes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import optuna
from omegaconf import DictConfig, OmegaConf

from autotune.settings import SoakSettings, SweepSettings
from autotune.study.choice import choose_trial, named_trial
from autotune.study.layout import SoakFiles, StudyLayout
from autotune.study.records import TrialRecord
from trials.contract.schema import ConfigError, TrialConfig, memory_budget_gib, to_trial_config

#: What <out> may hold from an earlier soak (anything else: refuse to write there).
OWN_FILES = SoakFiles.NAMES


# -- which trial, how long ------------------------------------------------------------------
def pick_trial(study: optuna.Study, records: list[TrialRecord], composed: DictConfig,
               options: SoakSettings) -> tuple[TrialRecord, str]:
    """The trial to soak and why; ConfigError (nothing written yet) when there is none."""
    done = [r for r in records if r.ok]
    if not done:
        raise ConfigError(f"study {study.study_name!r} has no complete trial to soak: run the "
                          "sweep first")
    if options.trial is None:
        base_cfg = to_trial_config(composed)
        record, why = choose_trial(study, records, OmegaConf.to_object(composed.export),
                                   prior_cv=base_cfg.hardware.cost.run_to_run_cv,
                                   budget_gib=memory_budget_gib(base_cfg))
    else:
        record = named_trial(study, records, options.trial, setting="soak.trial",
                             verb="soaked")
        why = f"trial {options.trial} as requested"
    if record.simulated:
        raise ConfigError(f"trial {record.number} was simulated (sweep.simulate): a soak needs "
                          "a configuration this machine runs; pick another soak.trial=N")
    if record.run_dir is None or not record.run_dir.has_config():
        raise ConfigError(f"trial {record.number} has no config.yaml in its run directory "
                          f"({record.trial_dir}): pick another soak.trial=N")
    return record, why


def trial_steps(record: TrialRecord, cfg: TrialConfig) -> int:
    """Steps the trial itself ran: compile + warm-up + measured (its configured counts
    when its scorecard lacks them)."""
    warm, measured = record.perf.warmup_steps_used, record.perf.measured_steps
    if isinstance(warm, int) and isinstance(measured, int) and measured > 0:
        return 1 + warm + measured
    return 1 + cfg.run.warmup_steps + cfg.run.measure_steps


def launch_overhead_s(record: TrialRecord, own_steps: int) -> float:
    """Seconds a launch costs besides its steps (imports, build, compile), from the trial."""
    step_s = record.step_time_s or 0.0
    if record.wall_s:
        return max(0.0, record.wall_s - (own_steps - 1) * step_s)
    return record.compile_s or 0.0


@dataclass
class SoakPlan:
    """Everything decided before launch, printed and stored with the result."""

    trial: int
    why: str
    config: Path
    steps: int
    steps_from: str
    checkpoint_every: int
    kill_at: float
    #: Kill once this many steps are done...
    kill_from: int | None
    #: ...and at least this many after the latest checkpoint (what the resume replays).
    replay: int
    #: The first step count that meets both (the planned kill).
    planned_kill: int | None
    overrides: list[str]
    step_s: float | None
    world_size: int
    #: What the workload's throughput counts (tokens, samples): every rate names it.
    unit: str | None = None


def planned_kill(steps: int, every: int, kill_from: int, replay: int) -> int | None:
    """The first step count >= kill_from with a checkpoint behind it and ``replay`` steps
    past that checkpoint (checkpoints fall on multiples of ``every``); None if none < steps."""
    for n in range(max(kill_from, every + replay), steps):
        if n % every >= replay:
            return n
    return None


def plan_soak(record: TrialRecord, why: str, cfg: TrialConfig, options: SoakSettings, *,
              files: SoakFiles, leak_mib: float) -> SoakPlan:
    own = trial_steps(record, cfg)
    if options.minutes is not None:
        if not record.step_time_s:
            raise ConfigError(f"trial {record.number} has no measured step time to turn "
                              "soak.minutes into steps: give soak.steps=N instead")
        launches = 2 if options.kill_at > 0 else 1
        budget_s = options.minutes * 60 - launches * launch_overhead_s(record, own)
        steps = max(10, int(budget_s / record.step_time_s))
        steps_from = (f"soak.minutes={options.minutes:g}: {launches} launch(es) of "
                      f"~{launch_overhead_s(record, own):.0f} s + steps of "
                      f"{record.step_time_s:.3g} s (trial {record.number}'s mean)")
    elif options.steps is not None:
        steps, steps_from = options.steps, f"soak.steps={options.steps}"
    else:
        steps, steps_from = 10 * own, f"10 x trial {record.number}'s {own} steps"
    every = options.checkpoint_every or max(1, steps // 10)
    kill_from = replay = 0
    kill = None
    if options.kill_at > 0:
        kill_from, replay = math.ceil(options.kill_at * steps), every // 2
        kill = planned_kill(steps, every, kill_from, replay)
        if kill is None:
            raise ConfigError(f"no checkpoint to resume from before the end of {steps} steps "
                              f"(checkpoint every {every}, kill at {options.kill_at:g}): lower "
                              "soak.checkpoint_every or soak.kill_at, or soak.kill_at=0 for "
                              "no kill")
    overrides = ["run.mode=production", f"run.steps={steps}", f"run.checkpoint_every={every}",
                 f"run.checkpoint_dir={files.checkpoints}", "run.resume=true",
                 f"run.metrics_path={files.metrics}"]
    if leak_mib:
        overrides.append(f"run.inject_leak_mib={leak_mib:g}")
    return SoakPlan(trial=record.number, why=why, config=record.run_dir.config,
                    steps=steps, steps_from=steps_from, checkpoint_every=every,
                    kill_at=options.kill_at, kill_from=kill_from if kill else None,
                    replay=replay, planned_kill=kill, overrides=overrides,
                    step_s=record.step_time_s, world_size=cfg.parallel.devices,
                    unit=record.perf.unit)


def output_dir(settings: SweepSettings, options: SoakSettings, trial: int, *,
               injected: bool = False) -> Path:
    """``soak.out``, else the study's directory of ``trial``'s soak (apart for a fault
    injection); ConfigError when it holds anything but an earlier soak's files."""
    out = (Path(options.out).resolve() if options.out
           else StudyLayout.of(settings).soak(trial, injected=injected))
    if out.exists() and not out.is_dir():
        raise ConfigError(f"soak.out={out} is a file: choose a directory")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OWN_FILES)
        if foreign:
            raise ConfigError(f"soak.out={out} holds other files ({', '.join(foreign[:3])}): "
                              "choose an empty or new soak.out=DIR")
    return out


