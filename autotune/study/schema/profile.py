"""What ``profile`` stores per trial (``autotune.profile``: ``{"<trial>": ProfileResult}``,
and the same object as ``profile.json`` beside the run)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from autotune.study.claims import update_attribute
from autotune.study.conditions import Conditions
from autotune.study.schema import keys
from autotune.study.schema.blob import VERSION_KEY, Blob
from trials.contract.events import ProfileRecord
from trials.contract.jsonsafe import to_json
from trials.contract.performance import Performance


@dataclass
class Interconnect(Blob):
    """The trial's gradient all-reduce against what commbench measured at that size."""

    trial_busbw_gbs: float | None = None
    commbench_busbw_gbs: float | None = None
    fraction: float | None = None  # trial over commbench
    commbench_ranks: int | None = None
    commbench_date: str | None = None


@dataclass
class ProfileResult(Blob):
    trial: int | None = None  # None: the composed configuration, not a trial
    dir: str = ""  # the profile run's directory (trace.json, raw/, profile.png)
    wall_s: float | None = None
    #: Where the profiled steps' time went: the trial program's profile event (its
    #: nested shares, top_ops and memory are the contract's: trials/contract/breakdown.py).
    profile: ProfileRecord = field(default_factory=ProfileRecord)
    performance: Performance = field(default_factory=Performance)  # without step times
    interconnect: Interconnect | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)  # Finding as a dict
    figure: str = ""
    label: str = ""
    #: The host's state over the profile run, judged against ``sweep.contention_cores``:
    #: a profile measured under other processes' load reads slower than the quiet machine.
    conditions: Conditions | None = None
    #: After a sweep's profile of its winner: the trials' time and the profile's share.
    sweep_s: float | None = None
    share_of_sweep: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {VERSION_KEY: self.VERSION}
        for f in dataclasses.fields(self):
            out[f.name] = getattr(self, f.name)
        out["profile"] = dataclasses.asdict(self.profile)
        out["performance"] = self.performance.to_dict()
        out["interconnect"] = self.interconnect.to_json() if self.interconnect else None
        out["conditions"] = self.conditions.to_dict() if self.conditions else None
        return to_json(out)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ProfileResult:
        data = data or {}
        plain = {k: v for k, v in data.items()
                 if k not in ("profile", "performance", "interconnect", "conditions")}
        result = super().from_json(plain)
        result.profile = ProfileRecord.from_json(data.get("profile") or {})
        result.performance = Performance.from_dict(data.get("performance"))
        link = data.get("interconnect")
        result.interconnect = Interconnect.from_json(link) if link else None
        result.conditions = Conditions.from_dict(data.get("conditions"))
        return result


def stored_profiles(study) -> dict[int, ProfileResult]:
    return {int(k): ProfileResult.from_json(v)
            for k, v in (study.user_attrs.get(keys.PROFILES) or {}).items()}


def store_profile(study, trial: int, result: ProfileResult) -> None:
    """Keep ``result`` as trial ``trial``'s profile (it replaces an earlier one)."""
    update_attribute(study, keys.PROFILES, lambda stored: stored.update(
        {str(trial): dataclasses.replace(result, trial=trial).to_json()}))
