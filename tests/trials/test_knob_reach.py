"""trials.contract.knob_reach: a knob the workload cannot apply is refused before launch."""

from __future__ import annotations

from trials.contract.knob_reach import BUILT_IN, Reach, config_problem, knob_problem
from trials.contract.schema import TrialConfig
from trials.contract.vocabulary import Recompute

BARE = Reach("mine", recompute=False)


def test_a_knob_the_workload_does_not_honour_is_refused_and_its_default_is_not():
    # Rule: recompute on a workload without blocks does nothing: refused; "none" is fine.
    assert "train.recompute=full" in knob_problem("train.recompute", Recompute.full, BARE,
                                                  cores=4)
    assert knob_problem("train.recompute", "none", BARE, cores=4) is None
    # Rule: num_workers other than 1 needs the pipeline to honour it; 1 is the default.
    assert "Workload.data_knobs" in knob_problem("data.num_workers", 2, BARE, cores=4)
    assert knob_problem("data.num_workers", 1, BARE, cores=4) is None
    # Rule: another data source than text is the built-in GPT's alone.
    assert knob_problem("data", "synthetic", BARE, cores=4) is not None
    assert knob_problem("data", "synthetic", BUILT_IN, cores=4) is None


def test_dataset_workers_above_the_core_count_are_refused_even_for_the_built_in():
    # Rule: MindSpore refuses num_parallel_workers above the cores, whatever the workload.
    problem = knob_problem("data.num_workers", 5, BUILT_IN, cores=4)
    assert problem is not None and "4 cores" in problem
    assert knob_problem("data.num_workers", 4, BUILT_IN, cores=4) is None


def test_config_problem_names_the_first_refused_knob_and_reach_round_trips():
    cfg = TrialConfig()
    cfg.data.multiprocessing = True
    # Rule: a configuration is checked knob by knob; the first problem is returned.
    assert "data.multiprocessing=true" in config_problem(cfg, BARE, cores=4)
    assert config_problem(cfg, BUILT_IN, cores=4) is None
    # Rule: a Reach survives its JSON trip (it is learnt in a child process).
    assert Reach.from_json(BUILT_IN.to_json()) == BUILT_IN
