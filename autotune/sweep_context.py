"""What a sweep and the tuning stages share, built and checked once: the context.

    context = SweepContext.build(composed, validate_settings(composed), overrides)
    study = context.open_study()

:meth:`SweepContext.build` validates everything a sweep needs before anything is
written (the study's name, the space, the baseline, the devices, a simulated step
time) and builds the pieces: the search space, the base trial config, the study's
layout, the runner, the cost model, the pruner and the refitter. The sweep
(autotune/sweep.py), one proposal's life (autotune/proposal.py) and the tuning
stages (autotune/stages/) read the context, never each other.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass

import optuna
from omegaconf import DictConfig, OmegaConf

from autotune.plan import fits
from autotune.plan.costmodel import CostModel
from autotune.plan.learning import Refitter
from autotune.presentation.invocation import autotune_command
from autotune.running import preflight, pruning
from autotune.running.job import Runner
from autotune.running.pruning import StepPruner
from autotune.running.runner import runner_for
from autotune.search import feasibility
from autotune.search.space import SearchSpace, check_devices, fingerprint_parts, space_file
from autotune.settings import Objective, SweepConfig, SweepSettings
from autotune.study import storage as S
from autotune.study.disk import DiskFull, Reserve, full_is_diskfull
from autotune.study.layout import StudyLayout
from autotune.study.surviving import SurvivingStorage
from trials.contract.schema import ConfigError, TrialConfig, memory_budget_gib, to_trial_config


@dataclass
class SweepContext:
    """The checked pieces of one sweep (``build`` makes them); ``storage`` is set once the
    study is open."""

    config: SweepConfig  # the whole typed config (validate_settings)
    composed: DictConfig  # the composed config, for the one study verdict (study/choice.py)
    settings: SweepSettings  # ``sweep.*``; a tuning stage's part of the sweep has its own
    space: SearchSpace
    base: TrialConfig  # the composed trial: the baseline before any knob
    layout: StudyLayout
    runner: Runner
    #: The cost model of this profile (the study's own fit once the study is open); None
    #: for a user workload (no dimensions).
    model: CostModel | None
    #: ``sweep.pruner``: installed as the study's pruner, asked after each new step.
    pruner: StepPruner
    refitter: Refitter | None  # refits the model on measured trials (``sweep.predict.refit``)
    #: Only the real trial program's measurements calibrate, profile and preflight.
    real_trials: bool
    #: Room kept on the study's disk to record a stop when the disk fills.
    reserve: Reserve
    storage: SurvivingStorage | None = None

    @classmethod
    def build(cls, composed: DictConfig, config: SweepConfig, overrides: list[str], *,
              runner: Runner | None = None, measured: bool = False,
              environment: bool = True) -> SweepContext:
        """Check and build (ConfigError naming the fix). ``runner`` replaces the one the
        settings choose (a benchmark's replay); ``measured``: its results are real
        measurements (a replay of recorded runs), so they may refit the cost model.
        ``environment=False`` checks the configuration only (``--print-config``): not that
        a workload of the user's imports here nor that a SLURM client answers, and no
        runner is made (making one reaps what a dead command left running)."""
        settings = config.sweep
        S.check_study_name(settings.study)
        space = SearchSpace.from_config(config.search, composed, overrides)
        base = to_trial_config(composed)
        real_trials = runner is None and not (settings.simulate or settings.trial_command)
        if real_trials:
            reach = preflight.check_runnable(base, import_entry=environment)
            preflight.check_reach(base, {k.path: k.choices for k in space.knobs}, reach,
                                  composed.search.name)
        model = None if base.workload.entry else CostModel.for_profile(base.hardware)
        if model is not None and settings.simulate:
            model.memory_interval = 0.0  # its trials run out of memory at its central peak
        _check_simulated_step_time(settings, space, base, model)
        pruner = pruning.build(settings, warmup_steps=base.run.warmup_steps)
        layout = StudyLayout.of(settings)
        check_devices(space, base, settings)
        _check_baseline(space, composed.search.name)
        refit = model is not None and settings.predict.refit and (real_trials or measured)
        return cls(config=config, composed=composed, settings=settings, space=space, base=base,
                   layout=layout, runner=runner or (runner_for(settings) if environment
                                                    else None), model=model,
                   pruner=pruner,
                   refitter=Refitter(model, settings.predict.oom_margin) if refit else None,
                   real_trials=real_trials, reserve=Reserve(layout.root))

    # -- what the pieces derive -----------------------------------------------------------
    @property
    def budget_gib(self) -> float:
        return memory_budget_gib(self.base)

    @property
    def multi_objective(self) -> bool:
        return self.settings.objective is Objective.pareto

    @property
    def prior_cv(self) -> float:
        return self.base.hardware.cost.run_to_run_cv

    def limited(self, n_trials: int) -> SweepContext:
        """A tuning stage's part of the sweep (``tune``'s data stage): at most ``n_trials``
        launched in all, the baseline's one-knob changes proposed first."""
        return dataclasses.replace(self, settings=dataclasses.replace(
            self.settings, n_trials=min(n_trials, self.settings.n_trials), neighbours=True))

    def fingerprint_parts(self) -> dict:
        return fingerprint_parts(self.space, self.base, simulated=self.settings.simulate)

    # -- the study ------------------------------------------------------------------------
    def open_study(self) -> optuna.Study:
        """The study of this space, workload and hardware: created, or loaded to resume.
        A disk that fills while it is created leaves nothing behind."""
        S.check_runs_dir(self.settings)
        root = self.layout.root
        new = next((d for d in (root, *root.parents) if d.parent.exists()), None)
        new = None if new is None or new.exists() else new
        try:
            with full_is_diskfull(root):
                self.storage = S.open_storage(self.settings, create=True)
                study = S.load_or_create(self.settings, self.storage, self.fingerprint_parts(),
                                         self.space.distributions())
                self.reserve.hold()
        except DiskFull:
            if new is not None:
                shutil.rmtree(new, ignore_errors=True)
            raise
        # What the report's diagnosis quotes: the stop rules the trials really ran under.
        study.set_user_attr(S.STOP_RULES, OmegaConf.to_container(
            OmegaConf.structured(self.settings.stop)))
        study.pruner = self.pruner
        if self.model is not None:  # the study's own fit, not another study's
            fits.adopt(study, self.model)
        return study


def _check_simulated_step_time(settings: SweepSettings, space: SearchSpace, base: TrialConfig,
                               model: CostModel | None) -> None:
    """A simulated step time needs the profile's peak in every dtype of the space."""
    if not settings.simulate or model is None:
        return
    problem = next(filter(None, map(model.peak_problem, space.dtypes(base))), None)
    if problem:
        raise ConfigError(f"sweep.simulate=true needs a step time: {problem}")


def _check_baseline(space: SearchSpace, search_name: str) -> None:
    """The baseline can run, and the space has something besides it."""
    _, problem = feasibility.structural_problem(space, space.baseline)
    if problem:
        raise ConfigError(f"the baseline configuration is impossible: {problem}")
    alone = feasibility.only_the_baseline(space)
    if alone:
        raise ConfigError(
            f"search space {search_name!r} has nothing to search besides the baseline: "
            f"{alone}; list values that can run under knobs: in {space_file(search_name)} "
            f"(or measure the baseline alone: {autotune_command('profile')})")
