"""``python -m autotune calibrate``: fit the cost model to runs measured elsewhere.

    python -m autotune calibrate calibrate.csv=my_runs.csv hardware=gpu_a100
    python -m autotune calibrate calibrate.csv=examples/calibrate/vtrain_a100.csv \\
        hardware=gpu_a100 calibrate.store=false     # the errors only, nothing stored

Reads a CSV of measured runs (your own, or a published table; the columns:
autotune/plan/measured_points.py), fits the constants of the hardware profile's cost model
by the same least squares a sweep uses (autotune/plan/calibration.py), prints each run's
measured and predicted step time (and peak memory where given), the in-sample error and the
leave-one-out error (each run predicted by a fit of the others: the error to expect on a run
the fit has not seen), and stores the fit for the hardware profile, not for this machine:
the runs were measured elsewhere. ``plan`` uses it and names it ("calibrate: fit of N runs
from FILE"); a new study starts from it (a study's own refits then belong to that study).

A fit whose constants leave their plausible range (autotune/plan/plausible.py: a compute
efficiency under 2 % of the peak, a fixed cost longer than the runs' steps, an allocator
factor over 4, an activation factor over 16) is refused with
the reason, exit 1, nothing stored: the model's terms do not describe those runs, and a fit
that bends its constants that far would mislead every plan. A bad row is one line naming the
row and the column, exit 2.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from rich.console import Console

from autotune.plan.calibrate_csv import calibrate_csv
from autotune.plan.measured_points import REQUIRED
from autotune.settings import CalibrateSettings, SweepConfig
from trials.contract.schema import ConfigError, to_trial_config


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    options: CalibrateSettings = config.calibrate
    if not options.csv:
        raise ConfigError("calibrate needs calibrate.csv=PATH: a CSV of measured runs, one per "
                          f"row, with the columns {', '.join(REQUIRED)} (the optional ones: "
                          "docs/how-to/plan-and-calibrate.md; an example: "
                          "examples/calibrate/vtrain_a100.csv)")
    return calibrate_csv(Path(options.csv), to_trial_config(composed).hardware,
                         store=options.store,
                         say=lambda line: console.print(line, markup=False, soft_wrap=True))
