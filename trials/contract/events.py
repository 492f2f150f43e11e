"""The events a trial reports, as typed records: start, step, checkpoint, summary, end.

A trial reports through two structured channels and nothing else: its metrics
file (JSON lines, one record per line, written and read by
:mod:`trials.contract.metrics`) and its exit code (:mod:`trials.contract.outcomes`).
The trainer, the scripted fake trial, the monitor, scoring and pruning all use
these classes, so a field has one name everywhere.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trials.contract.breakdown import MemoryCurve, OpRow
from trials.contract.jsonsafe import float_of
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance

#: Version of the metrics format; bump when an event changes meaning.
FORMAT_VERSION = 2


class Event(str, enum.Enum):
    """Event kinds in the metrics file, in the order a trial emits them."""

    START = "start"  # world size, what MindSpore applied, budgets
    STEP = "step"  # one optimizer step: loss, grad norm, timings, tokens
    CHECKPOINT = "checkpoint"  # production mode: a checkpoint was written
    PROFILE = "profile"  # run.profile_steps: where the profiled steps' time went
    SUMMARY = "summary"  # the four-layer scorecard
    END = "end"  # outcome and reason; always the last line


class Phase(str, enum.Enum):
    """What a step was for. Only MEASURE steps enter throughput."""

    COMPILE = "compile"  # the first step: graph compilation dominates it
    WARMUP = "warmup"
    MEASURE = "measure"
    TRAIN = "train"  # production mode
    PROFILE = "profile"  # after measuring, under the profiler: in no measured number


def _known_fields(cls, data: dict) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class StartRecord:
    """The trial is built and about to train."""

    kind: ClassVar[Event] = Event.START
    world_size: int = 1
    start_step: int = 0
    total_steps: int = 0
    accumulation: int = 1
    micro_batch_size: int | None = None
    tokens_per_step: int | None = None
    flops_per_token: float | None = None
    budget_gib: float | None = None
    #: Knob values as MindSpore reports them back (what really took effect).
    applied: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> StartRecord:
        return cls(**_known_fields(cls, data))


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step. Times in seconds, memory in GiB: ``step_s`` is the training
    loop's period, from the previous step's end to this one's (the first step: from its
    fetch), so the steps' times add up to the run's wall time; ``data_wait_s`` is the part
    spent fetching its batches. ``peak_rss_gib`` is this rank's peak so far of the memory
    its processes hold, counted once (the proportional set size of the rank's process and
    its dataset workers: trials/memory.py; the name is older)."""

    kind: ClassVar[Event] = Event.STEP
    step: int
    phase: Phase
    loss: float
    grad_norm: float
    step_s: float
    data_wait_s: float
    tokens: int
    peak_rss_gib: float
    clipped: bool = False
    overflow: bool = False
    updated: bool = True
    loss_scale: float = 1.0
    #: The anonymous part of that memory after the step (heap and shared memory, PSS; not
    #: the peak): a leak shows as its slope over a long run.
    rss_gib: float = 0.0

    @classmethod
    def from_json(cls, data: dict) -> StepRecord:
        d = _known_fields(cls, data)
        d["phase"] = Phase(d["phase"])
        for key in ("loss", "grad_norm", "step_s", "data_wait_s", "peak_rss_gib", "loss_scale",
                    "rss_gib"):
            if key in d:
                d[key] = float_of(d[key])
        return cls(**d)


@dataclass(frozen=True)
class CheckpointRecord:
    kind: ClassVar[Event] = Event.CHECKPOINT
    step: int
    path: str

    @classmethod
    def from_json(cls, data: dict) -> CheckpointRecord:
        return cls(**_known_fields(cls, data))


@dataclass(frozen=True)
class ProfileRecord:
    """Where the profiled steps' time went (trials/profiling.py, trials/contract/breakdown.py).

    ``seconds``/``shares`` split the mean profiled step into CATEGORIES; ``overhead`` is the
    profiled steps' step time over the measured steps' of the same run (both the mean of
    the loop's periods, :func:`trials.contract.stats.step_time`, :class:`StepRecord`).
    """

    kind: ClassVar[Event] = Event.PROFILE
    steps: int = 0
    step_s: float = 0.0
    unprofiled_step_s: float = 0.0
    overhead: float = 0.0
    seconds: dict = field(default_factory=dict)
    shares: dict = field(default_factory=dict)
    communication: dict = field(default_factory=dict)
    top_ops: list[OpRow] = field(default_factory=list)
    memory: MemoryCurve = field(default_factory=MemoryCurve)
    ops_seen: int = 0
    trace: str = ""
    raw_dir: str = ""

    @classmethod
    def from_json(cls, data: dict) -> ProfileRecord:
        """Tolerant: rows and curve given as JSON objects (or already typed) are read."""
        known = _known_fields(cls, data)
        known["top_ops"] = [r if isinstance(r, OpRow) else OpRow.from_json(r)
                            for r in known.get("top_ops") or []]
        memory = known.get("memory")
        known["memory"] = (memory if isinstance(memory, MemoryCurve)
                           else MemoryCurve.from_json(memory))
        return cls(**known)


@dataclass(frozen=True)
class SummaryRecord:
    """The four-layer scorecard (:func:`trials.contract.scorecard.scorecard`).

    ``performance`` is the JSON object of a :class:`Performance` (the wire format);
    read it through :attr:`perf`.
    """

    kind: ClassVar[Event] = Event.SUMMARY
    correctness: dict = field(default_factory=dict)
    performance: dict = field(default_factory=dict)
    stability: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> SummaryRecord:
        return cls(**_known_fields(cls, data))

    @property
    def perf(self) -> Performance:
        """The performance layer, typed."""
        return Performance.from_dict(self.performance)

    def layers(self) -> dict[str, dict]:
        return {"correctness": self.correctness, "performance": self.performance,
                "stability": self.stability, "resources": self.resources}


@dataclass(frozen=True)
class EndRecord:
    """How the trial ended; always the last line of the file. A configuration the program
    refuses before it runs (exit 2, "config error: ..." on stderr) writes no file: its
    metrics path is part of what was refused."""

    kind: ClassVar[Event] = Event.END
    outcome: Outcome
    reason: str = ""

    @classmethod
    def from_json(cls, data: dict) -> EndRecord:
        return cls(outcome=Outcome.parse(data.get("outcome")), reason=str(data.get("reason", "")))


Record = (StartRecord | StepRecord | CheckpointRecord | ProfileRecord | SummaryRecord
          | EndRecord)

#: Every record kind, in the order a trial emits them.
RECORDS = (StartRecord, StepRecord, CheckpointRecord, ProfileRecord, SummaryRecord, EndRecord)
_BY_KIND: dict[str, type] = {c.kind.value: c for c in RECORDS}


def record_to_json(record: Record) -> dict[str, Any]:
    """The record as a JSON-ready dict with its ``event`` kind (values not yet cleaned)."""
    out: dict[str, Any] = {"event": record.kind.value}
    for f in dataclasses.fields(record):
        out[f.name] = _plain(getattr(record, f.name))
    return out


def _plain(value: Any) -> Any:
    """Enums as their values, nested records (a profile's rows and curve) as dicts."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def record_from_json(data: dict) -> Record | None:
    """The typed record of one decoded line; None for an unknown kind or a malformed line."""
    cls = _BY_KIND.get(str(data.get("event")))
    if cls is None:
        return None
    try:
        return cls.from_json(data)
    except (TypeError, ValueError, KeyError):
        return None
