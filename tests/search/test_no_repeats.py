"""No repeated proposals (autotune/search/unrepeated.py): the sampler draws again rather
than propose a configuration the study already has, and a repeat that still comes
(queued, or the space nearly exhausted) is not launched and adds no leaderboard row
(autotune/report/leaderboard.py)."""

from __future__ import annotations

import random

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.samplers import BaseSampler

from autotune.report import leaderboard
from autotune.search.unrepeated import NoRepeats, nearest_unseen, point_key
from autotune.study.records import load_records

SPACE = {"a": CategoricalDistribution([1, 2]), "b": CategoricalDistribution(["x", "y"])}


class Stubborn(BaseSampler):
    """A fake sampler that proposes the same point every time (what TPE converges to)."""

    def __init__(self, **extra) -> None:
        self.point = {"a": 1, "b": "x", **extra}

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.point[param_name]


def finish(study: optuna.Study, value: float = 1.0, space: dict = SPACE) -> dict:
    trial = study.ask(space)
    trial.set_user_attr("reason", "ok")
    study.tell(trial, value)
    return trial.params


def test_the_sampler_draws_again_rather_than_repeat_a_measured_point():
    study = optuna.create_study(direction="maximize",
                                sampler=NoRepeats(Stubborn(), SPACE, seed=0))
    points = [finish(study) for _ in range(4)]
    # Rule: the wrapped sampler's point first; once it is measured, a draw that repeats
    # nothing, until every point of the space has been proposed once.
    assert points[0] == {"a": 1, "b": "x"}
    assert len({tuple(sorted(p.items())) for p in points}) == 4
    # Rule: with every point taken, the repeat is proposed (the sweep reuses its result).
    assert finish(study) in points


def changed_knobs(a: dict, b: dict) -> int:
    return sum(a[k] != b[k] for k in a)


def test_once_the_sampler_repeats_itself_the_nearest_unseen_point_is_proposed():
    space = {"a": CategoricalDistribution([1, 2]), "b": CategoricalDistribution(["x", "y"]),
             "c": CategoricalDistribution([True, False])}
    study = optuna.create_study(direction="maximize",
                                sampler=NoRepeats(Stubborn(c=True), space, seed=3))
    favourite = {"a": 1, "b": "x", "c": True}
    points = [finish(study, space=space) for _ in range(8)]
    # Rule: the sampler's own point first; then every point one change away from it, then
    # those two changes away, then three: a local search where the sampler wants to be
    # (a uniform draw would jump to a far corner as soon as the second proposal).
    assert points[0] == favourite
    assert [changed_knobs(p, favourite) for p in points] == [0, 1, 1, 1, 2, 2, 2, 3]
    # ...and each such trial says so (its progress line reads the role).
    assert [t.user_attrs.get("role") for t in study.trials] == [None] + ["nearest"] * 7


def test_the_nearest_unseen_search_gives_up_past_its_limit():
    space = {f"k{i}": CategoricalDistribution([0, 1, 2]) for i in range(4)}
    point = {name: 0 for name in space}
    seen = {point_key(point)}
    near = nearest_unseen(point, space, seen, random.Random(0))
    assert near is not None and changed_knobs(near, point) == 1
    # Every point within one change taken: the next is two changes away...
    seen |= {point_key({**point, name: v}) for name in space for v in (1, 2)}
    assert changed_knobs(nearest_unseen(point, space, seen, random.Random(0)), point) == 2
    # ...unless looking there would pass the limit (8 one-change points looked at first).
    assert nearest_unseen(point, space, seen, random.Random(0), limit=10) is None


def test_a_lost_attempt_does_not_take_its_point():
    study = optuna.create_study(direction="maximize",
                                sampler=NoRepeats(Stubborn(), SPACE, seed=0))
    lost = study.ask(SPACE)
    lost.set_user_attr("reason", "orphaned")  # its orchestrator died: it measured nothing
    study.tell(lost, state=optuna.trial.TrialState.FAIL)
    # Rule: only a result that stands for its configuration takes the point.
    assert finish(study) == lost.params


def test_tpe_in_a_sweep_proposes_no_configuration_twice(harness):
    harness.script()
    # The fake's speed is 1000 x threads / micro_batches: TPE homes in on threads=2,
    # micro_batches=1 and, unwrapped, proposes it again and again.
    space = harness.space("narrow", {"train.micro_batches": [1, 2, 4],
                                     "runtime.threads": [2, 1], "data.prefetch": [16, 32]})
    code, out, err = harness.run(space, "sweep.n_trials=8", "sweep.n_startup_trials=2",
                                 "sweep.seed=1")
    assert code == 0, err
    trials = harness.study().trials
    # Rule: every proposal is a configuration of its own, each launched once.
    assert [t.user_attrs.get("reused_from") for t in trials] == [None] * len(trials)
    assert len({tuple(sorted(t.params.items())) for t in trials}) == len(trials) == 8
    assert sum(bool(t.user_attrs.get("launched")) for t in trials) == 8


def test_a_repeated_proposal_is_not_launched_and_adds_no_leaderboard_row(harness):
    harness.script()
    space = harness.space("dup", {"train.micro_batches": [1, 2, 4], "runtime.threads": [2, 1]})
    code, out, err = harness.run(space, "sweep.n_trials=2", "sweep.neighbours=true")
    assert code == 0, err
    study = harness.study()
    baseline = study.trials[0].params
    study.enqueue_trial(baseline)  # a point proposed again (as a resumed queue can)
    code, out, err = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true")
    assert code == 0, err
    trials = harness.study().trials
    again = trials[2]
    # Rule: the repeat reuses the baseline's result and launches nothing; the budget
    # still buys 3 real launches (sweep.n_trials counts launches).
    assert again.params == baseline and again.user_attrs["reused_from"] == 0
    assert again.value == trials[0].value
    assert again.user_attrs["launched"] is False and "trial_dir" not in again.user_attrs
    assert sum(bool(t.user_attrs.get("launched")) for t in trials) == 3
    assert len(list((harness.runs / "s").glob("trial-*"))) == 3
    # Rule: one leaderboard row per configuration; the baseline's row stands for both of
    # its proposals (the sweep's printed board and the frame the report tabulates agree).
    board = leaderboard.frame(load_records(harness.study()))
    assert sorted(board["trial"]) == [0, 1, 3]
    assert board.set_index("trial").loc[0, leaderboard.PROPOSALS_COLUMN] == 2
    assert "(=#0)" not in out and leaderboard.PROPOSALS_COLUMN in out


def test_points_queued_past_a_spent_budget_are_settled_not_left_waiting(harness):
    """A worker queues its seed while another claims the last launch (the PostgreSQL
    workers' race, here made certain): once the whole budget is spent, every queued point is
    told as the budget's, so no trial of the finished study stays WAITING."""
    from optuna.trial import TrialState

    harness.script()
    space = harness.space("late", {"train.micro_batches": [1, 2, 4]})
    code, out, err = harness.run(space, "sweep.n_trials=1")
    assert code == 0, err
    study = harness.study()
    for m in (2, 4):
        study.enqueue_trial({"train.micro_batches": m})  # queued, never to be launched
    code, out, err = harness.run(space, "sweep.n_trials=1")
    assert code == 0, err
    trials = harness.study().trials
    assert not [t.number for t in trials if t.state is TrialState.WAITING]
    assert sum(bool(t.user_attrs.get("launched")) for t in trials) == 1
    assert {t.user_attrs.get("reason") for t in trials[1:]} == {"budget"}
