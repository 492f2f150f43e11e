"""What ``soak`` stores: each soaked trial's latest verdict (``autotune.soak``: ``{trial:
SoakVerdict}``, and ``soak.json`` in its directory; a fault-injection soak is not stored).
autotune/soak/report.py writes it; the analysis is autotune/soak/stability.py.

Non-finite numbers are stored as strings ("nan", "inf": trials/contract/jsonsafe.py);
read a float field through ``float_of`` where it may be one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.study.schema import keys
from autotune.study.schema.blob import Blob
from trials.contract.jsonsafe import to_json


@dataclass
class LossStats(Blob):
    first: float | None = None
    last: float | None = None
    spike_factor: float = 0.0  # a spike: loss > this x the running median
    spike_window: int = 0
    spikes: int = 0
    spike_steps: list[int] = field(default_factory=list)  # the first few
    nonfinite: int = 0


@dataclass
class Rates(Blob):
    """Shares of the soak's steps (0.01 = 1 %) and their counts."""

    overflow: float = 0.0
    skipped_updates: float = 0.0
    clipped: float = 0.0
    overflow_steps: int = 0
    skipped_steps: int = 0
    clipped_steps: int = 0


@dataclass
class ThroughputDrift(Blob):
    judged: bool = False
    points: int = 0
    median_tokens_per_s: float | None = None
    drift_pct_per_100_steps: float | None = None  # with its 95 % interval
    drift_low: float | None = None
    drift_high: float | None = None
    first_decile_tokens_per_s: float | None = None
    last_decile_tokens_per_s: float | None = None
    decile_change_pct: float | None = None
    drifting: bool = False
    unit: str | None = None


@dataclass
class MemoryGrowth(Blob):
    judged: bool = False
    points: int = 0
    processes: int = 0
    threshold_mib_per_100_steps: float = 0.0
    rss_first_gib: float | None = None
    rss_last_gib: float | None = None
    rss_max_gib: float | None = None
    slope_mib_per_100_steps: float | None = None  # within a process, with its 95 % interval
    slope_low: float | None = None
    slope_high: float | None = None
    leak: bool = False


@dataclass
class LossTrend(Blob):
    """The loss over the run's second half (% of its median per 100 steps)."""

    judged: bool = False
    points: int = 0
    from_step: int | None = None
    to_step: int | None = None
    pct_per_100_steps: float | None = None
    low: float | None = None
    high: float | None = None
    first_decile: float | None = None
    last_decile: float | None = None
    change_pct: float | None = None
    rising: bool = False


@dataclass
class SoakFlags(Blob):
    """What the soak found wrong, one flag per finding (stored as ``analysis.flags``)."""

    spikes: bool = False
    nonfinite: bool = False
    loss_rising: bool = False
    drift: bool = False
    leak: bool = False


@dataclass
class SoakAnalysis(Blob):
    NESTED = {"loss": LossStats, "rates": Rates, "throughput": ThroughputDrift,
              "memory": MemoryGrowth, "loss_trend": LossTrend, "flags": SoakFlags}

    steps: int = 0
    first_step: int | None = None
    last_step: int | None = None
    loss: LossStats = field(default_factory=LossStats)
    rates: Rates = field(default_factory=Rates)
    throughput: ThroughputDrift = field(default_factory=ThroughputDrift)
    memory: MemoryGrowth = field(default_factory=MemoryGrowth)
    loss_trend: LossTrend = field(default_factory=LossTrend)
    flags: SoakFlags = field(default_factory=SoakFlags)


@dataclass
class ResumeCheck(Blob):
    """Did the run resumed from its checkpoint continue the killed one?"""

    resume_step: int | None = None
    killed_last_step: int | None = None
    compared: int = 0  # replayed steps compared
    compared_steps: list[int] = field(default_factory=list)
    max_rel_diff: float | None = None
    identical: bool = False
    tolerance: float = 0.0
    matched: bool = False
    first_resumed_loss: float | None = None
    trend_predicted: float | None = None
    trend_band: float | None = None
    within_trend: bool | None = None
    continued: bool = False
    verdict: str = ""
    kill_done: int | None = None
    kill_checkpoint: int | None = None
    killed_after_s: float | None = None


@dataclass
class Kill(Blob):
    after_step: int | None = None
    checkpoint_step: int | None = None
    after_s: float | None = None


@dataclass
class Launch(Blob):
    """One launch of the soak's production run (autotune/soak/attempts.py Attempt)."""

    index: int = 0
    start_step: int | None = None
    first_step: int | None = None
    last_step: int | None = None
    steps: int = 0
    checkpoints: list[int] = field(default_factory=list)
    outcome: str | None = None  # an Outcome value
    detail: str = ""
    killed: bool = False
    kill_done: int | None = None
    kill_checkpoint: int | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    first_step_s: float | None = None
    log_tail: str = ""


@dataclass
class SoakVerdict(Blob):
    NESTED = {"analysis": SoakAnalysis, "resume": ResumeCheck, "kill": Kill,
              "attempts": Launch}

    # The plan (autotune/soak/plan.py SoakPlan)
    trial: int | None = None
    chosen_because: str = ""
    config: str = ""
    steps: int = 0
    steps_from: str = ""
    checkpoint_every: int = 0
    kill_at: float = 0.0
    planned_kill_after_step: int | None = None
    overrides: list[str] = field(default_factory=list)
    trial_step_s: float | None = None
    world_size: int = 1
    unit: str | None = None
    # Where it ran
    out: str = ""
    plot: str = ""
    metrics: str = ""
    # How it went
    finished: bool = False
    failure: str | None = None
    exit_code: int = 1
    wall_s: float = 0.0
    steps_trained: int = 0
    steps_replayed: int = 0
    kill: Kill | None = None
    resume: ResumeCheck | None = None
    analysis: SoakAnalysis | None = None  # None: the soak ended before any analysis
    attempts: list[Launch] = field(default_factory=list)
    # The flags the verdicts rest on, and the verdicts
    leak: bool = False
    drift: bool = False
    loss_rising: bool = False
    spikes: int = 0
    resume_ok: bool | None = None
    verdicts: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        # JSON-safe (the study attribute and soak.json): non-finite numbers as "nan"/"inf".
        return to_json(super().to_json())


def stored_soaks(study) -> dict[int, SoakVerdict]:
    """Each soaked trial's latest soak, in the order they were stored (the newest last). A
    study written before soaks were kept by trial holds one verdict: it reads as its
    trial's."""
    return {int(k): SoakVerdict.from_json(v) for k, v in _by_trial(study).items()}


def soak_of(study, trial: int) -> SoakVerdict | None:
    """``trial``'s latest soak, or None."""
    stored = _by_trial(study).get(str(trial))
    return SoakVerdict.from_json(stored) if stored else None


def last_soak(study) -> SoakVerdict | None:
    """The soak stored last, of whichever trial."""
    soaks = _by_trial(study)
    return SoakVerdict.from_json(soaks[next(reversed(soaks))]) if soaks else None


def store_soak(study, verdict: SoakVerdict) -> None:
    """Keep a soak's result as its trial's: it replaces that trial's earlier soak, and
    leaves other trials' (soaking trial 3 had replaced trial 0's, which export and tune
    then read as never soaked)."""
    soaks = {k: v for k, v in _by_trial(study).items() if k != str(verdict.trial)}
    soaks[str(verdict.trial)] = verdict.to_json()
    study.set_user_attr(keys.SOAK, soaks)


def _by_trial(study) -> dict[str, dict]:
    stored = study.user_attrs.get(keys.SOAK) or {}
    if "trial" in stored:  # one verdict, as stored before soaks were kept by trial
        return {str(stored["trial"]): stored} if stored["trial"] is not None else {}
    return stored
