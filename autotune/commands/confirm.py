"""``python -m autotune confirm``: re-measure the finalists against measurement noise.

The baseline and the ``top_k`` fastest other distinct configurations run ``repeats``
more times each, interleaved in rounds so that drift of a noisy machine hits all of them
alike. The order inside each round is shuffled (seeded by ``sweep.seed``, printed and stored as
``autotune.confirm_order``): a load that comes and goes on a period could line up with
a fixed order (B A C, B A C, ...) and make a difference that is not there look
separable. Each finalist is tested against the baseline by a paired t-test on log
tokens/s within the rounds (autotune/study/noise.py); the top two against each other
too. When the baseline runs at another speed than it did in the sweep, confirm says so:
the machine changed, and only the within-round gains compare. The medians, spreads and
tests are stored on the study (``autotune.confirm``), the runs themselves with the
trials' repeats, where ``export`` and ``report`` read them. Each run is stored as it
finishes: a confirm stopped part-way (SIGTERM, Ctrl-C) resumes when run again with the
same finalists and rounds, running only what did not finish
(autotune/study/confirm_progress.py).

The verdicts are autotune/study/confirmation.py; running the rounds,
autotune/running/confirm.py; what is stored, autotune/study/schema/confirm.py.
"""

from __future__ import annotations

from omegaconf import DictConfig
from rich.console import Console

from autotune.running.confirm import run_confirm
from autotune.settings import SweepConfig
from autotune.study.confirmation import (  # noqa: F401  (tests and callers import them here)
    SPEED_CHANGE,
    WIDE_INTERVAL,
    confirm_finalists,
    render,
    rounds_of,
    too_few_rounds,
)

#: What ``autotune`` says when it is stopped during a confirm.
STOPPED = ("the running re-measurement was killed; the finished ones are stored: run the "
           "same command again to run the rest")


def run(composed: DictConfig, overrides: list[str], console: Console, *,
        config: SweepConfig) -> int:
    return run_confirm(composed, console, config)
