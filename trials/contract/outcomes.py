"""How a trial ended: one enum that carries everything each reason means.

The trial program ends with one of the first six (its exit code says which);
the orchestrator adds the ones only it can decide (it stopped the trial, ruled
the point out before launch, or lost it). Everything that reads a reason (the
sampler's feedback, the tables, the plots, the diagnosis, the progress line)
asks this enum instead of comparing strings.

``state`` is the name of the Optuna ``TrialState`` the reason is told as; this
package imports neither Optuna nor MindSpore, so the orchestrator maps the name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Constraint(str, enum.Enum):
    """Which Optuna constraint a reason sets (value > 0 = infeasible)."""

    NONE = "none"  # told without constraints (FAIL) or feasible so far (memory from the peak)
    MEMORY = "memory_over_budget_gib"
    INFEASIBLE = "infeasible"
    DIVERGED = "diverged"


@dataclass(frozen=True)
class Meaning:
    state: str  # Optuna TrialState name: COMPLETE, PRUNED or FAIL
    constraint: Constraint
    label: str  # one phrase for readers of the failure taxonomy
    colour: str  # matplotlib colour of its markers
    exit_code: int | None = None  # the trial program's exit code, where it can end so
    launched: bool = True  # a process ran (False: decided before any launch)
    evaluated: bool = True  # its result stands for its configuration (reusable)


class Outcome(str, enum.Enum):
    """A trial's reason code. The value is what the ``end`` event and the study store."""

    # -- the trial program's own outcomes (exit codes) ----------------------------------
    OK = "ok"
    CRASH = "crash"
    CONFIG_ERROR = "config_error"
    DIVERGED = "diverged"
    OOM = "oom"
    UNSUPPORTED = "unsupported"
    # -- decided by the orchestrator ------------------------------------------------------
    SLOW = "slow"
    HANG = "hang"
    TIMEOUT = "timeout"
    INFEASIBLE = "infeasible"
    PREDICTED_OOM = "predicted_oom"
    ORPHANED = "orphaned"
    INTERRUPTED = "interrupted"
    CONTENDED = "contended"
    BUDGET = "budget"

    @property
    def meaning(self) -> Meaning:
        return MEANINGS[self]

    @property
    def state(self) -> str:
        return self.meaning.state

    @property
    def label(self) -> str:
        return self.meaning.label

    @property
    def colour(self) -> str:
        return self.meaning.colour

    @property
    def exit_code(self) -> int:
        code = self.meaning.exit_code
        if code is None:
            raise ValueError(f"{self.value} is decided by the orchestrator; no trial exits so")
        return code

    @property
    def evaluated(self) -> bool:
        return self.meaning.evaluated

    @property
    def is_failure(self) -> bool:
        """Counts against ``sweep.max_failure_rate``: the launch taught nothing."""
        return self.state == "FAIL" and self.meaning.launched and self.evaluated

    @classmethod
    def from_exit_code(cls, code: int | None) -> Outcome:
        """Classify an exit code. A signal (negative) is a crash: a SIGKILL may be the
        kernel's OOM killer or anyone's ``kill -9``, so whether a killed trial ran out of
        memory is decided from evidence (autotune/running/memory_evidence.py), never
        from the signal alone."""
        for outcome, meaning in MEANINGS.items():
            if code is not None and meaning.exit_code == code:
                return outcome
        return cls.CRASH

    @classmethod
    def parse(cls, value: object) -> Outcome:
        """An outcome from a stored value; anything unknown is a crash (never raises)."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.CRASH


#: How allocation failures read: MindSpore's RuntimeErrors, C++'s ``std::bad_alloc``, the
#: C library's ENOMEM. The trial matches them in the exceptions it catches (and turns
#: them into a structured ``oom``); the orchestrator only in the output of a process that
#: died before it could say so (an uncaught ``bad_alloc`` aborts in native code).
OOM_MESSAGES = ("Allocate memory failed", "bad_alloc", "Out of memory", "out of memory",
                "Cannot allocate memory", "Malloc for kernel", "memory isn't enough")


_C = Constraint
MEANINGS: dict[Outcome, Meaning] = {
    # 1 is what an uncaught Python exception gives, so it stays "crash".
    Outcome.OK: Meaning("COMPLETE", _C.NONE, "finished and measured", "tab:blue", 0),
    Outcome.CRASH: Meaning("FAIL", _C.NONE, "the process died without a structured outcome",
                           "black", 1),
    Outcome.CONFIG_ERROR: Meaning("PRUNED", _C.INFEASIBLE,
                                  "the trial program rejected its configuration", "tab:olive", 2),
    Outcome.DIVERGED: Meaning("PRUNED", _C.DIVERGED,
                              "loss went non-finite or spiked, or most updates were skipped; "
                              "the trial's guard stopped it",
                              "tab:purple", 3),
    Outcome.OOM: Meaning("PRUNED", _C.MEMORY, "ran out of memory", "tab:red", 4),
    Outcome.UNSUPPORTED: Meaning("PRUNED", _C.INFEASIBLE,
                                 "the backend cannot run this combination", "tab:olive", 5),
    Outcome.SLOW: Meaning("PRUNED", _C.NONE, "tokens/s far below the best so far",
                          "tab:gray"),
    Outcome.HANG: Meaning("FAIL", _C.NONE,
                          "no step within the compile budget, or no step progress; killed",
                          "tab:brown"),
    Outcome.TIMEOUT: Meaning("FAIL", _C.NONE, "ran past the wall-clock cap; killed",
                             "tab:brown"),
    Outcome.INFEASIBLE: Meaning("PRUNED", _C.INFEASIBLE,
                                "breaks a structural rule or is dominated by an OOM; "
                                "never launched", "tab:olive", launched=False),
    Outcome.PREDICTED_OOM: Meaning("PRUNED", _C.MEMORY,
                                   "the cost model predicts it over the memory budget; never "
                                   "launched", "tab:pink", launched=False),
    Outcome.ORPHANED: Meaning("FAIL", _C.NONE,
                              "its orchestrator died; the configuration was re-queued",
                              "tab:gray", evaluated=False),
    Outcome.INTERRUPTED: Meaning("FAIL", _C.NONE,
                                 "the orchestrator was stopped (SIGTERM/SIGINT); the "
                                 "configuration was re-queued", "tab:gray", evaluated=False),
    Outcome.CONTENDED: Meaning("FAIL", _C.NONE,
                               "stopped (slow, hang, timeout) while other processes loaded "
                               "the host; re-queued once, to run when it is quiet", "tab:cyan",
                               evaluated=False),
    Outcome.BUDGET: Meaning("FAIL", _C.NONE,
                            "the launch budget was spent by other workers; never launched",
                            "tab:gray", launched=False, evaluated=False),
}
