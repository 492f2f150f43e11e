"""One readable record per Optuna trial: what the leaderboard, report and export read.

Everything a trial learned is stored as Optuna user attributes (JSON), so the
study database alone is enough: optuna-dashboard and the ``optuna`` CLI see it too.
What is stored, and under which key, is autotune/study/schema/; a record reads it
through the schema's dataclasses (:attr:`TrialRecord.card`, :attr:`~TrialRecord.confirmed`,
:attr:`~TrialRecord.repeat_records`, :attr:`~TrialRecord.prediction`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from autotune.study.conditions import Conditions, load_flag
from autotune.study.layout import StudyLayout
from autotune.study.schema.confirm import ConfirmVerdict

# The attribute keys live in the schema (one owner); imported here under the names that
# many modules read them by (records.REASON, ...).
from autotune.study.schema.keys import (  # noqa: F401
    BASELINE_ROLE,
    CONDITIONS,
    CONFIRM,
    CONTENDED_RETRY,
    DETAIL,
    HEARTBEAT,
    IMPRECISE,
    LAUNCHED,
    LOG_TAIL,
    MEMORY_FIT,
    MICRO_BATCH_SIZE,
    PLACEMENT,
    PREDICTION,
    PROCESS,
    REASON,
    REUSED_FROM,
    ROLE,
    SAMPLED_ROLE,
    SCORECARD,
    TRIAL_DIR,
    WALL_S,
    WORKER,
)
from autotune.study.schema.keys import CONFIRM_VERDICTS as CONFIRM_STUDY_KEY  # noqa: F401
from autotune.study.schema.keys import REPEATS as REPEATS_STUDY_KEY  # noqa: F401
from autotune.study.schema.prediction import StoredPrediction
from autotune.study.schema.repeats import (  # noqa: F401
    CONFIRM_SOURCE,
    REPEAT_FIELDS,
    Repeat,
    add_repeats,
    stored_repeats,
)
from autotune.study.schema.scorecard import Scorecard
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance
from trials.contract.schema import ConfigError, TrialConfig
from trials.contract.trial_dir import TrialDir, of_record
from trials.contract.units import rate


def outcome_of(trial: FrozenTrial) -> Outcome | None:
    """The trial's reason; None while it runs or waits."""
    value = trial.user_attrs.get(REASON)
    return Outcome.parse(value) if value is not None else None


def launch_counts(launched: bool, outcome: Outcome | None) -> bool:
    """A launch (or a live claim of one) against n_trials; lost ones (orphaned,
    interrupted, stopped under load) are retried instead."""
    return launched and (outcome is None or outcome.evaluated)


def counts_as_launch(trial: FrozenTrial) -> bool:
    """:func:`launch_counts` of a trial in the storage."""
    return launch_counts(bool(trial.user_attrs.get(LAUNCHED)), outcome_of(trial))


def evaluated(trial: FrozenTrial) -> bool:
    """A finished trial whose result stands for its configuration (reusable, counted)."""
    outcome = outcome_of(trial)
    return trial.state.is_finished() and outcome is not None and outcome.evaluated


@dataclass
class TrialRecord:
    number: int
    state: str
    params: dict[str, Any]
    #: How it ended; None while it runs or waits.
    reason: Outcome | None
    detail: str
    launched: bool
    role: str
    #: The tokens/s told to Optuna: its own run pooled with the racing re-runs made when
    #: it was told. None unless it completed. A finished Optuna trial cannot change, so
    #: runs made later (racing it as the leader, the baseline's re-measurements) are
    #: pooled in :attr:`standing`, THE figure the trial is ranked and shown by;
    #: ``confirm``'s stand apart (``confirmed_tokens_per_s``).
    tokens_per_s: float | None
    mfu: float | None
    peak_memory_gib: float | None
    step_time_s: float | None
    compile_s: float | None
    data_wait_share: float | None
    micro_batch_size: int | None
    started: dt.datetime | None
    wall_s: float | None
    trial_dir: str | None
    reused_from: int | None
    scorecard: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    #: More runs of the same configuration (racing, confirm): performance dicts with
    #: REPEAT_FIELDS and their source (read them with Performance.from_dict).
    repeats: list = field(default_factory=list)
    #: Its gain over the baseline with an interval (autotune.study.selection.annotate).
    vs_baseline: Any = None
    #: When its run ended (the study's clock: what pairs it in time with baseline runs).
    finished: dt.datetime | None = None

    @property
    def run_dir(self) -> TrialDir | None:
        """Its run directory (None: it never ran, or was reused)."""
        return of_record(self.trial_dir)

    def config(self) -> TrialConfig | None:
        """The configuration it ran, read back from its run directory; None when there is
        none, or it no longer loads (written by an older autotune)."""
        run_dir = self.run_dir
        if run_dir is None or not run_dir.has_config():
            return None
        try:
            return run_dir.read_config()
        except ConfigError:
            return None

    @property
    def ok(self) -> bool:
        return self.state == TrialState.COMPLETE.name

    @property
    def counts_as_launch(self) -> bool:
        """It spent one of sweep.n_trials (:func:`launch_counts`)."""
        return launch_counts(bool(self.launched), self.reason)

    @property
    def card(self) -> Scorecard:
        """:attr:`scorecard`, read as the schema's Scorecard."""
        return Scorecard.from_json(self.scorecard)

    @property
    def perf(self) -> Performance:
        """What the trial's own run measured (its scorecard's performance layer)."""
        return self.card.performance

    @property
    def rate(self) -> str:
        """How its throughput is named: "tokens/s", or "samples/s" for a workload that
        counts samples (trials/contract/units.py)."""
        return rate(self.perf.unit)

    @property
    def repeat_records(self) -> list[Repeat]:
        """:attr:`repeats`, read as the schema's Repeat."""
        return [Repeat.from_json(r) for r in self.repeats]

    def timed_runs(self) -> list[tuple[float | None, Performance]]:
        """Its runs measured during the sweep (:meth:`sweep_runs`) with when each ended
        (epoch seconds; None where not known): its own first, then its repeats."""
        own = self.finished.timestamp() if self.finished is not None else None
        return [(own, self.perf), *((r.at, r.performance)
                                    for r in self.repeat_records if not r.confirm)]

    def sweep_run_conditions(self) -> list[Conditions | None]:
        """The host's state over each of :meth:`timed_runs`, in that order (None where not
        recorded)."""
        return [self.conditions, *(r.conditions for r in self.repeat_records if not r.confirm)]

    def sweep_run_loads(self) -> list[bool]:
        """Whether each of :meth:`timed_runs` was measured under load, in that order."""
        return [c is not None and c.contended for c in self.sweep_run_conditions()]

    @property
    def standing(self) -> float | None:
        """Its tokens/s over every run the sweep measured of it (:meth:`sweep_runs`,
        pooled): what ranks it against the others. The told figure (:attr:`tokens_per_s`)
        until it is measured again after it was told (raced as the leader, the baseline's
        re-measurements): one lucky run must not stay the best once the study holds runs
        that say otherwise. None unless it completed."""
        runs = self.sweep_runs()
        if self.tokens_per_s is None or len(runs) == 1:
            return self.tokens_per_s
        return Performance.pool(runs) or self.tokens_per_s

    @property
    def sweep_figure(self) -> str:
        """Its :attr:`standing` as every line outside the leaderboard names it ("2,023
        samples/s in the sweep", with the runs it pools where there are more than its own):
        one figure a trial, wherever it is quoted."""
        if self.standing is None:
            return "no figure in the sweep"
        runs = len(self.sweep_runs())
        pooled = f" (geometric mean of {runs} runs)" if runs > 1 else ""
        return f"{self.standing:,.0f} {self.rate} in the sweep{pooled}"

    def sweep_runs(self) -> list[Performance]:
        """Its runs measured during the sweep: its own, racing's, the baseline's
        re-measurements. ``confirm``'s runs are measured later, under other conditions,
        and compare only with each other (:meth:`confirm_runs`): never pooled with these."""
        return [perf for _, perf in self.timed_runs()]

    def confirm_runs(self) -> list[Performance]:
        """Its ``confirm`` runs, measured in interleaved rounds with the other finalists'."""
        return [r.performance for r in self.repeat_records if r.confirm]

    def quiet_run_sets(self) -> list[list[Performance]]:
        """Its sweep runs and its confirm runs, each set without the runs measured under
        load: what the study's run-to-run noise is estimated from. A contended run claims
        less on its own (:func:`autotune.study.noise.under_load`); pooled into the noise,
        one disturbed run would widen every quiet comparison of the study."""
        sweep = [] if self.contended else [self.perf]
        sweep += [r.performance for r in self.repeat_records
                  if not r.confirm and not r.under_load]
        confirm = [r.performance for r in self.repeat_records if r.confirm and not r.under_load]
        return [sweep, confirm]

    @property
    def runs(self) -> list[Performance]:
        """Every measured run of its configuration: its own, then its repeats."""
        return [self.perf, *(r.performance for r in self.repeat_records)]

    @property
    def n_runs(self) -> int:
        """Runs its sweep figure and gains rest on: its own, its racing re-runs and (the
        baseline) its re-measurements; confirm's runs stand apart."""
        return len(self.sweep_runs())

    @property
    def prediction(self) -> StoredPrediction | None:
        """The cost model's prediction before it launched, where one was made."""
        stored = self.attrs.get(PREDICTION)
        return StoredPrediction.from_json(stored) if stored else None

    @property
    def confirmed(self) -> ConfirmVerdict | None:
        """``confirm``'s verdict on it, where it was a finalist."""
        stored = self.attrs.get(CONFIRM)
        return ConfirmVerdict.from_json(stored) if stored else None

    @property
    def confirmed_tokens_per_s(self) -> float | None:
        """The median tokens/s of ``confirm``'s interleaved re-runs, where it ran."""
        verdict = self.confirmed
        return float(verdict.median) if verdict is not None and verdict.median else None

    @property
    def conditions(self) -> Conditions | None:
        """The host's state over its own run (other load, steal, CPU clock, placement)."""
        return Conditions.from_dict(self.attrs.get(CONDITIONS))

    @property
    def contended(self) -> bool:
        """Its own run was measured under other processes' load (sweep.contention_cores)."""
        conditions = self.conditions
        return bool(conditions is not None and conditions.contended)

    @property
    def imprecise(self) -> str | None:
        """The baseline's interval missed its precision target: by how much."""
        return self.attrs.get(IMPRECISE)

    @property
    def repeat_conditions(self) -> list[Conditions | None]:
        """The conditions of each repeat, in ``repeats`` order (None: not recorded)."""
        return [r.conditions for r in self.repeat_records]

    @property
    def flags(self) -> list[str]:
        """What a reader must know about its figures: 'load 1.3' (its run was measured
        under load), 'imprecise' (the baseline missed its precision target)."""
        load = load_flag(self.conditions)
        return [*([load] if load else []), *(["imprecise"] if self.imprecise else [])]

    @property
    def simulated(self) -> bool:
        """Produced by the simulated trial program: a prediction, never a measurement."""
        return self.perf.simulated

    @property
    def reason_text(self) -> str:
        """The reason's value, or the Optuna state (running, waiting) before there is one."""
        return self.reason.value if self.reason is not None else self.state.lower()

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        a = trial.user_attrs
        stored = a.get(SCORECARD) or {}
        card = Scorecard.from_json(stored)
        perf = card.performance
        return cls(
            number=trial.number, state=trial.state.name, params=dict(trial.params),
            reason=outcome_of(trial),
            detail=a.get(DETAIL, ""), launched=bool(a.get(LAUNCHED, False)),
            role=a.get(ROLE, SAMPLED_ROLE), tokens_per_s=told_tokens_per_s(trial, perf),
            mfu=perf.mfu, peak_memory_gib=card.resources.peak_rss_gib_max_rank,
            step_time_s=perf.step_time_s, compile_s=perf.compile_s,
            data_wait_share=perf.data_wait_share,
            micro_batch_size=a.get(MICRO_BATCH_SIZE), started=trial.datetime_start,
            wall_s=a.get(WALL_S), trial_dir=a.get(TRIAL_DIR), reused_from=a.get(REUSED_FROM),
            scorecard=stored, attrs=dict(a), finished=trial.datetime_complete)


def distinct(records: list[TrialRecord]) -> list[TrialRecord]:
    """Trials that measured something of their own: no reused copies, no lost attempts."""
    return [r for r in records if r.reused_from is None
            and (r.reason is None or r.reason.evaluated)]


def baseline(records: list[TrialRecord]) -> TrialRecord | None:
    """The baseline configuration's trial; a completed retry of it when the first was lost."""
    first = next((r for r in records if r.role == BASELINE_ROLE), None)
    if first is None:
        return None
    same = [r for r in distinct(records) if r.params == first.params]
    return min(same, key=lambda r: (not r.ok, r.number), default=first)


def told_tokens_per_s(trial: FrozenTrial, perf: Performance) -> float | None:
    """The tokens/s Optuna was told (its first objective); the run's own where a completed
    trial holds no value (never, from the sweep)."""
    if trial.state is not TrialState.COMPLETE:
        return None
    if trial.values:
        return float(trial.values[0])
    return perf.tokens_per_s


def conditions_of(repeat: dict) -> Conditions | None:
    """The host's state over a stored repeat (or a re-run's performance layer)."""
    return Repeat.from_json(repeat).conditions


#: A repeat's place in the command that ran it (schema.Repeat.run).
REPEAT_RUN = Repeat.RUN


def pooled_tokens_per_s(record: TrialRecord) -> float | None:
    """tokens/s pooled over every measured run of the trial's configuration (its own and
    all its repeats; :meth:`Performance.pool`)."""
    return Performance.pool(record.runs)


def load_records(study, *, trials: list[FrozenTrial] | None = None,
                 layout: StudyLayout | None = None) -> list[TrialRecord]:
    """Every trial (``trials``, when already read), with what is kept on the study merged
    in: confirm's verdict as attrs['confirm'], more runs of its configuration as
    ``repeats``. With the study's ``layout``, a run directory recorded under another root
    (a study copied or moved since) is found under this one."""
    confirmed = study.user_attrs.get(CONFIRM_STUDY_KEY) or {}
    repeats = study.user_attrs.get(REPEATS_STUDY_KEY) or {}
    out = []
    for trial in study.get_trials(deepcopy=False) if trials is None else trials:
        record = TrialRecord.from_trial(trial)
        if str(trial.number) in confirmed:
            record.attrs[CONFIRM] = confirmed[str(trial.number)]
        record.repeats = list(repeats.get(str(trial.number), []))
        if layout is not None and record.trial_dir:
            record.trial_dir = str(_under(layout, record.trial_dir))
        out.append(record)
    return out


def _under(layout: StudyLayout, trial_dir: str) -> Path:
    """A recorded run directory, under the study's own root where it is there (the study
    was copied or moved since it recorded it); else as recorded."""
    recorded = Path(trial_dir)
    if recorded.is_relative_to(layout.root):
        return recorded
    return layout.relocated(recorded) or recorded


def unit_of(records: list[TrialRecord]) -> str | None:
    """The unit the study's trials measured in (the workload's: tokens or samples); None
    before any trial recorded one (then: tokens)."""
    return next((u for r in records if (u := r.perf.unit)), None)
