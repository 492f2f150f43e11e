"""autotune.study.twins: a proposal whose configuration runs elsewhere reuses its result."""

from __future__ import annotations

import signal

import optuna
import pytest
from optuna.trial import TrialState

from autotune.signals import Stopped
from autotune.study.twins import await_twin


def study_with_twin(tmp_path, reason: str, state: TrialState | None):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    twin = study.ask({"x": optuna.distributions.IntDistribution(1, 8)})
    if state is not None:
        twin.set_user_attr("reason", reason)
        study.tell(twin, 1.0 if state is TrialState.COMPLETE else None, state=state)
    proposal = study.ask({"x": optuna.distributions.IntDistribution(1, 8)})
    return study, twin, proposal


def test_a_finished_twin_whose_result_stands_is_reused(tmp_path):
    study, twin, proposal = study_with_twin(tmp_path, "ok", TrialState.COMPLETE)
    # Rule: the twin is returned to reuse; the proposal is left for the caller to tell.
    assert await_twin(study, proposal, twin.number, still_here=lambda: None,
                      budget_gib=8.0).number == twin.number
    assert study.trials[proposal.number].state is TrialState.RUNNING


def test_a_lost_twin_makes_the_proposal_a_budget_no_launch(tmp_path):
    study, twin, proposal = study_with_twin(tmp_path, "orphaned", TrialState.FAIL)
    # Rule: no result to reuse: None, and the proposal is told as `budget` (not launched).
    assert await_twin(study, proposal, twin.number, still_here=lambda: None,
                      budget_gib=8.0) is None
    told = study.trials[proposal.number]
    assert told.state is TrialState.FAIL and told.user_attrs["reason"] == "budget"
    assert told.user_attrs["launched"] is False


def test_a_stop_while_waiting_requeues_the_proposal_and_propagates(tmp_path):
    study, twin, proposal = study_with_twin(tmp_path, "", None)  # twin still running

    def stop():
        raise Stopped(signal.SIGINT)

    # Rule: Stopped is re-raised after the proposal is failed as interrupted and re-queued.
    with pytest.raises(Stopped):
        await_twin(study, proposal, twin.number, still_here=stop, budget_gib=8.0)
    trials = study.trials
    assert trials[proposal.number].user_attrs["reason"] == "interrupted"
    assert trials[-1].state is TrialState.WAITING
