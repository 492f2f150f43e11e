"""Which fit of the cost model a study's commands use, and where a study keeps its own.

    model = fits.study_model(study, cfg.hardware)   # the study's fit, else where it starts
    fits.keep(study, model, constants)              # a sweep's refit, stored in the study

A sweep's refits belong to its study (one workload x hardware profile: the study's
fingerprint holds both). They are stored in the study itself, as its user attr
``cost_model_fit``, so the sweep when it resumes, every worker of a shared study,
``report`` and ``export`` read the same fit, and no other study on the machine changes it.
A study without a fit of its own starts from the fit ``calibrate`` imported for the
profile, else from the profile's priors (CostModel.start). Each fit's ``source`` names it
wherever a prediction is printed: "fit of N measured trial(s) of study S", "calibrate: fit
of N runs from FILE (...)", "priors of hardware profile P".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autotune.plan import calibration
from autotune.plan.costmodel import CostModel
from autotune.plan.predict import Constants
from autotune.study.schema.keys import COST_MODEL_FIT
from trials.contract.schema import HardwareConfig

#: The study user attr that holds the study's own fit (calibration.to_record's record).
STUDY_FIT = COST_MODEL_FIT


def study_fit(study, model: CostModel) -> Constants | None:
    """The study's own fit for the model's profile, or None (none yet, another profile's,
    or another version of the model's)."""
    prior = Constants.priors(model.hardware)
    return calibration.from_record(study.user_attrs.get(STUDY_FIT), prior, model.hardware.name)


def adopt(study, model: CostModel) -> Constants:
    """Give the model the study's fit (else its start) and return it."""
    model.constants = study_fit(study, model) or model.start
    return model.constants


def study_model(study, hardware: HardwareConfig, *, nodes: int = 1,
                cache_dir: Path | None = None) -> CostModel:
    """The cost model as the study knows it: its own fit, else where it starts."""
    model = CostModel.for_profile(hardware, nodes=nodes, cache_dir=cache_dir)
    adopt(study, model)
    return model


def keep(study, model: CostModel, constants: Constants) -> Constants:
    """Name a refit of the study's trials after the study, store it in the study, and give
    it to the model; returns it."""
    named = (f"{constants.source} of study {study.study_name}"
             if constants.source != model.start.source  # only OOMs measured: priors raised
             else f"{constants.source}, raised by the measured OOMs of study {study.study_name}")
    if model.start.source.startswith("calibrate"):
        named += f", from {model.start.source}"
    constants = replace(constants, source=named)
    study.set_user_attr(STUDY_FIT, calibration.to_record(constants, model.hardware.name))
    model.constants = constants
    return constants
