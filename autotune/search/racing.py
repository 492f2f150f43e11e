"""Racing (``sweep.race.rounds=R``): a new trial within noise of the best is re-measured
beside it, R interleaved rounds, and the sampler is told the pooled estimate.

The decision lives here; the runs come through ``measure``, which the sweep gives
(its runner: locally, or as SLURM jobs in a SLURM sweep).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.study import noise
from autotune.study import records as R
from autotune.study.layout import StudyLayout
from autotune.study.schema.repeats import RACE_SOURCE
from trials.contract.performance import Performance
from trials.contract.trial_dir import TrialDir

#: ``measure(source, run_dir, name)``: one more run of ``source``'s configuration in
#: ``run_dir``; its performance layer, or None when it did not finish ok.
Measure = Callable[[TrialDir, TrialDir, str], dict | None]


def race(study: optuna.Study, number: int, performance: dict, leader: R.TrialRecord,
         records: list[R.TrialRecord], *, rounds: int, prior_cv: float, layout: StudyLayout,
         measure: Measure, note: Callable[[str], None]) -> float | None:
    """Race trial ``number`` (its run measured ``performance``) against ``leader`` when the
    two are within noise; the pooled tokens/s of trial ``number`` over its runs, or None
    when there was no race."""
    if not rounds or leader is None or not leader.trial_dir:
        return None
    level = noise.run_to_run_noise(records, prior_cv)
    perfs: dict[int, list[dict]] = {leader.number: [], number: []}

    def gain_so_far():
        """The new trial over the leader, on every run of each so far."""
        return noise.compare(noise.runs_from([performance, *perfs[number]]),
                             noise.runs_of(leader) + noise.runs_from(perfs[leader.number]),
                             level)

    gain = gain_so_far()
    if gain is None or gain.real:
        return None
    note(f"racing trial {number} against the best, trial {leader.number} ({gain.text()}): "
         f"up to {rounds} interleaved round(s), until one is separably faster")
    entrants = {leader.number: leader.run_dir, number: layout.trial(number)}
    for i in range(rounds):
        for entrant, source in entrants.items():
            perf = measure(source, layout.race(number, i, entrant),
                           f"{study.study_name}/race/{entrant}")
            if perf is not None:
                perfs[entrant].append(perf)
        gain = gain_so_far()
        if gain is not None and gain.real:
            break
    R.add_repeats(study, perfs, RACE_SOURCE)
    return Performance.pool([performance, *perfs[number]])
