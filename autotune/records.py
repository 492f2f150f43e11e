"""One readable record per Optuna trial: what the leaderboard, report and export read.

Everything a trial learned is stored as Optuna user attributes (JSON), so the
study database alone is enough: optuna-dashboard and the ``optuna`` CLI see it too.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

#: User-attribute keys written by the orchestrator (one place, so readers agree).
REASON = "reason"  # ok, diverged, oom, unsupported, infeasible, duplicate, hang, timeout, slow,
#                    crash, config_error, orphaned
DETAIL = "detail"  # one line of explanation
LAUNCHED = "launched"  # True when a process ran (counts against n_trials)
ROLE = "role"  # baseline, neighbour, sampled, retry
REUSED_FROM = "reused_from"
TRIAL_DIR = "trial_dir"
SCORECARD = "scorecard"
MICRO_BATCH_SIZE = "micro_batch_size"
WALL_S = "wall_s"
LOG_TAIL = "log_tail"
HEARTBEAT = "heartbeat"
WORKER = "worker"  # {"host": ..., "pid": ...} of the orchestrator that runs it
PROCESS = "process"  # {"host": ..., "pgid": ..., "marker": ...} of the trial's process group
CONFIRM = "confirm"  # confirmation runs: {"tokens_per_s": [...], "median": ..., ...}

#: Reasons of trials that measured nothing: their configuration counts as not yet tried.
NOT_EVALUATED = frozenset({"orphaned", "budget"})


def counts_as_launch(trial: FrozenTrial) -> bool:
    """A launch (or a live claim of one) against n_trials; orphaned ones are retried instead."""
    return bool(trial.user_attrs.get(LAUNCHED)) and trial.user_attrs.get(REASON) != "orphaned"


def evaluated(trial: FrozenTrial) -> bool:
    """A finished trial whose result stands for its configuration (reusable, counted)."""
    return trial.state.is_finished() and trial.user_attrs.get(REASON) not in NOT_EVALUATED


@dataclass
class TrialRecord:
    number: int
    state: str
    params: dict[str, Any]
    reason: str
    detail: str
    launched: bool
    role: str
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

    @property
    def ok(self) -> bool:
        return self.state == TrialState.COMPLETE.name

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        a = trial.user_attrs
        card = a.get(SCORECARD) or {}
        perf = card.get("performance", {})
        res = card.get("resources", {})
        return cls(
            number=trial.number, state=trial.state.name, params=dict(trial.params),
            reason=a.get(REASON, "running" if trial.state is TrialState.RUNNING else ""),
            detail=a.get(DETAIL, ""), launched=bool(a.get(LAUNCHED, False)),
            role=a.get(ROLE, "sampled"),
            tokens_per_s=perf.get("tokens_per_s") if trial.state is TrialState.COMPLETE else None,
            mfu=perf.get("mfu"), peak_memory_gib=res.get("peak_rss_gib_max_rank"),
            step_time_s=perf.get("step_time_median_s"), compile_s=perf.get("compile_s"),
            data_wait_share=perf.get("data_wait_share"),
            micro_batch_size=a.get(MICRO_BATCH_SIZE), started=trial.datetime_start,
            wall_s=a.get(WALL_S), trial_dir=a.get(TRIAL_DIR), reused_from=a.get(REUSED_FROM),
            scorecard=card, attrs=dict(a))


#: Study attribute where `confirm` stores re-run spreads, keyed by trial number.
CONFIRM_STUDY_KEY = "autotune.confirm"


def load_records(study) -> list[TrialRecord]:
    """Every trial, with confirmation re-runs (kept on the study) merged in as attrs['confirm']."""
    confirmed = study.user_attrs.get(CONFIRM_STUDY_KEY) or {}
    out = []
    for trial in study.get_trials(deepcopy=False):
        record = TrialRecord.from_trial(trial)
        if str(trial.number) in confirmed:
            record.attrs[CONFIRM] = confirmed[str(trial.number)]
        out.append(record)
    return out
