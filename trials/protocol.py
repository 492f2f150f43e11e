"""The contract between a trial process and whoever launched it.

A trial reports through two structured channels and nothing else:

* its metrics file, JSON lines, one event per line (written by
  :mod:`trials.metrics_log`, read by :mod:`autotune.metrics_reader`);
* its exit code, one per :class:`Outcome`.

This module is plain Python so that the orchestrator can import it without
pulling in MindSpore.
"""

from __future__ import annotations

import enum

#: Version of the metrics format; bump when an event changes meaning.
FORMAT_VERSION = 1


class Outcome(str, enum.Enum):
    """How a trial ended. The value is what the ``end`` event carries."""

    OK = "ok"
    DIVERGED = "diverged"
    OOM = "oom"
    UNSUPPORTED = "unsupported"
    CONFIG_ERROR = "config_error"
    CRASH = "crash"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]

    @classmethod
    def from_exit_code(cls, code: int | None) -> Outcome:
        """Classify an exit code (negative = killed by that signal)."""
        if code is None:
            return cls.CRASH
        for outcome, value in EXIT_CODES.items():
            if value == code:
                return outcome
        # The kernel's OOM killer sends SIGKILL; a failed thread creation under a
        # tight address-space limit ends in SIGABRT (shared/mindspore-cpu.md).
        if code in (-9, -6):
            return cls.OOM
        return cls.CRASH


# 1 is what an uncaught Python exception gives, so it stays "crash".
EXIT_CODES: dict[Outcome, int] = {
    Outcome.OK: 0,
    Outcome.CRASH: 1,
    Outcome.CONFIG_ERROR: 2,
    Outcome.DIVERGED: 3,
    Outcome.OOM: 4,
    Outcome.UNSUPPORTED: 5,
}


class Event(str, enum.Enum):
    """Event kinds in the metrics file, in the order a trial emits them."""

    START = "start"  # config knobs, world size, pid
    STEP = "step"  # one optimizer step: loss, grad norm, timings, tokens
    CHECKPOINT = "checkpoint"  # production mode: a checkpoint was written
    SUMMARY = "summary"  # the four-layer scorecard
    END = "end"  # outcome and reason; always the last line


class Phase(str, enum.Enum):
    """What a step was for. Only MEASURE steps enter throughput."""

    COMPILE = "compile"  # the first step: graph compilation dominates it
    WARMUP = "warmup"
    MEASURE = "measure"
    TRAIN = "train"  # production mode
