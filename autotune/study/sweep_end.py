"""How a sweep ends: a kind the loop acts on, and the sentence it prints.

The budget and futility rules (:mod:`autotune.study.budget`,
:mod:`autotune.study.futility`) say why a sweep ends; the loop and the dispatcher
act on the :class:`EndKind` alone and never read the sentence, which is for people.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import optuna


class EndKind(enum.Enum):
    """Why the sweep ends, as far as what happens next is concerned."""

    DONE = "done"  # the launch budget is spent (or nothing was left to run)
    EXHAUSTED = "exhausted"  # every configuration of the space is evaluated or ruled out
    IDLE = "idle"  # the sampler proposed nothing new, many times in a row: stop early
    STOPPED = "stopped"  # a stop rule fired: the sweep failed (exit code 1)

    @property
    def halts(self) -> bool:
        """Ends the sweep at once: proposals waiting to start are given back, rather than
        run because their launches are already claimed."""
        return self in (EndKind.IDLE, EndKind.STOPPED)

    @property
    def failed(self) -> bool:
        return self is EndKind.STOPPED


@dataclass(frozen=True)
class SweepEnd:
    """One ending: its kind and the line printed for it (word for word what the user reads)."""

    kind: EndKind
    message: str

    @classmethod
    def stopped(cls, message: str) -> SweepEnd:
        return cls(EndKind.STOPPED, message)

    @property
    def failed(self) -> bool:
        return self.kind.failed

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def __str__(self) -> str:
        return self.message


#: What a sweep whose loop ran out of proposals without another reason says.
DONE = SweepEnd(EndKind.DONE, "done")


@dataclass
class SweepOutcome:
    """What a run of the sweep came to: its exit code, its last line, the study it ran."""

    exit_code: int
    message: str
    study: optuna.Study | None = None
