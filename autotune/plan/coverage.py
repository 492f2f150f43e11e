"""Which of a fit's per-dtype constants were measured, and what a plan in another dtype
predicts with.

A fit of fp16 runs leaves bf16's compute efficiency and activation factor at their priors
(calibration.fit: a constant no measurement informs keeps its prior). Planned as they are,
an A100 would rank fp16 1.5x faster than bf16 (a fitted 0.75 against the prior 0.5) on a
device whose datasheet gives both the same peak: a gap the fit never measured. So a dtype
the fit did not measure predicts with the compute efficiency of a measured dtype with the
same datasheet peak (predict.Constants.efficiency_source, for every prediction), and the
plan says so here; every constant still at its prior is named.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.plan.predict import Constants
from trials.contract.schema import DType, HardwareConfig
from trials.contract.vocabulary import precision_name


@dataclass(frozen=True)
class Coverage:
    #: The constants to predict with.
    constants: Constants
    #: One line per planned dtype that predicts with something the fit did not measure.
    notes: tuple[str, ...]


def measured(constants: Constants, prior: Constants, what: str) -> set[str]:
    """The dtypes whose ``what`` ("compute_efficiency" or "activation_factor") a fit
    measured: the ones it records, else (a fit stored before it recorded them) the ones
    that differ from the priors."""
    recorded = {"compute_efficiency": constants.efficiency_dtypes,
                "activation_factor": constants.activation_dtypes}[what]
    if recorded:
        return set(recorded)
    ours, theirs = getattr(constants, what), getattr(prior, what)
    return {d for d, v in ours.items() if v != theirs.get(d)}


def datasheet_peak(hw: HardwareConfig, dtype: str) -> float | None:
    peak = hw.peak_tflops.get(dtype)
    return float(peak) if peak is not None else None


def dtype_coverage(constants: Constants, prior: Constants, hw: HardwareConfig,
                   dtypes: list[DType]) -> Coverage:
    """The constants a plan of ``dtypes`` predicts with, and what it must say about them.
    Priors alone: nothing to say (the plan names its constants as the priors)."""
    if constants == prior:
        return Coverage(constants, ())
    efficient = measured(constants, prior, "compute_efficiency")
    activations = measured(constants, prior, "activation_factor")
    covered = "/".join(precision_name(DType(d)) for d in sorted(efficient)) or "no dtype"
    notes = []
    for dtype in dtypes:
        d, name = dtype.value, precision_name(dtype)
        said = []
        if d not in efficient:
            donor = constants.efficiency_source(d, hw)
            if donor != d:
                said.append(f"compute efficiency {constants.compute_efficiency[donor]:.3f} is "
                            f"{precision_name(DType(donor))}'s, fitted (not measured in "
                            f"{name}: the profile's datasheet peak is "
                            f"{datasheet_peak(hw, d):g} TFLOP/s for both)")
            else:
                said.append(f"compute efficiency {prior.compute_efficiency[d]:g} is the prior "
                            f"(the fit measured {covered} step times)")
        if d not in activations:
            said.append(f"activation factor {prior.activation_factor[d]:g} is the prior (the "
                        f"fit measured no {name} peak memory)")
        if said:
            notes.append(f"{name} constants: " + "; ".join(said))
    return Coverage(constants, tuple(notes))
