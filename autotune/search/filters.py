"""What a proposal meets before it costs a launch: a list of filters, one interface.

Each filter looks at one :class:`Proposal` and answers None (go on), :class:`Rejected`
(ruled out at zero cost, told to Optuna with its outcome) or :class:`Reused` (an
identical finished trial stands for it). The sweep runs them in order and stops at
the first answer:

1. :class:`Structural`: the split, batch divisibility, what the hardware profile
   runs (:func:`autotune.search.feasibility.structural_problem`);
2. :class:`RuledOutByStage`: a knob value an earlier tuning stage ruled out;
3. :class:`Reuse`: the same parameters already measured (a measurement outranks a
   prediction, so this comes before the cost model);
4. :class:`PredictedOOM`: the cost model says it cannot fit even at the optimistic end
   of its memory interval (the baseline is exempt); a point whose interval holds the
   budget is launched and flagged ``tight``;
5. :class:`OOMDominance`: a smaller micro-batch of the same point already ran out of
   memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial

from autotune.search import feasibility
from autotune.search.space import SearchSpace
from autotune.settings import PredictSettings
from autotune.study import budget
from autotune.study import records as R
from autotune.study.stage_results import ruling
from autotune.study.view import StudyView
from trials.contract.outcomes import Outcome
from trials.contract.schema import TrialConfig, micro_batch_size


@dataclass
class Proposal:
    """A point the sampler proposed, with its config (None when it does not even build)."""

    trial: optuna.Trial
    params: dict[str, Any]
    cfg: TrialConfig | None
    #: Why it cannot run as built (structural rules), or None.
    problem: str | None
    is_baseline: bool

    @classmethod
    def of(cls, trial: optuna.Trial, space: SearchSpace) -> Proposal:
        """The proposal of ``trial``; one that builds has its micro-batch size recorded (the
        OOM dominance rule compares it)."""
        params = dict(trial.params)
        cfg, problem = feasibility.structural_problem(space, params)
        if problem is None:
            trial.set_user_attr(R.MICRO_BATCH_SIZE, micro_batch_size(cfg))
        return cls(trial, params, cfg, problem, params == space.baseline)


@dataclass(frozen=True)
class Rejected:
    why: str
    outcome: Outcome = Outcome.INFEASIBLE


@dataclass(frozen=True)
class Reused:
    original: FrozenTrial


Verdict = Rejected | Reused | None


class Filter(Protocol):
    def check(self, proposal: Proposal, view: StudyView) -> Verdict: ...


class Structural:
    def check(self, proposal: Proposal, view: StudyView) -> Verdict:
        return Rejected(proposal.problem) if proposal.problem else None


class RuledOutByStage:
    """Knob values an earlier tuning stage ruled out (``tune``: correctness)."""

    def __init__(self, ruled_out: dict) -> None:
        self.ruled_out = ruled_out

    def check(self, proposal: Proposal, view: StudyView) -> Verdict:
        why = ruling(self.ruled_out, proposal.params)
        return Rejected(why) if why else None


class Reuse:
    def check(self, proposal: Proposal, view: StudyView) -> Verdict:
        original = budget.evaluated_result(view.trials, proposal.params)
        return Reused(original) if original is not None else None


class PredictedOOM:
    """Rules a point out only when even the optimistic end of the cost model's memory
    interval (peak x (1 - the held-out error), autotune/plan/predict.py) exceeds the
    budget, as ``plan`` rules; a point whose interval holds the budget is launched and flagged
    ``memory_fit: tight`` on the trial. The prediction is recorded on the trial either
    way. The baseline is always launched: it is the user's own running configuration,
    and its measurement corrects a model calibrated elsewhere (another workload, another
    study) before the model rules anything out."""

    def __init__(self, model, budget_gib: float, options: PredictSettings) -> None:
        self.model, self.budget_gib, self.options = model, budget_gib, options

    def check(self, proposal: Proposal, view: StudyView) -> Verdict:
        prediction = self.model.predict_config(proposal.cfg)
        proposal.trial.set_user_attr(R.PREDICTION, prediction.record())
        proposal.trial.set_user_attr(R.MEMORY_FIT, prediction.memory_fit(self.budget_gib).value)
        if proposal.is_baseline or not self.options.rule_out_oom or \
                not prediction.over_budget(self.budget_gib):
            return None
        low, _ = prediction.peak_interval_gib
        return Rejected(f"predicted peak {prediction.peak_gib:.2f} GiB, even its optimistic "
                        f"end {low:.2f} GiB > budget {self.budget_gib:g} GiB: "
                        f"{prediction.memory.explain(self.budget_gib)}", Outcome.PREDICTED_OOM)


class OOMDominance:
    def check(self, proposal: Proposal, view: StudyView) -> Verdict:
        oom = feasibility.oom_dominating(proposal.params, proposal.cfg, view.records)
        if oom is None:
            return None
        return Rejected(f"trial {oom.number} ran out of memory at micro-batch size "
                        f"{oom.micro_batch_size}; this one needs "
                        f"{micro_batch_size(proposal.cfg)}")


def first_verdict(filters: list[Filter], proposal: Proposal, view: StudyView) -> Verdict:
    """The first filter's answer that is not None; None when every filter lets it pass."""
    for f in filters:
        verdict = f.check(proposal, view)
        if verdict is not None:
            return verdict
    return None
