"""The search space as data, and the rules that reject a point before launch."""

from __future__ import annotations

import pytest

import autotune.settings  # noqa: F401 - registers the sweep schema
from autotune.search.feasibility import only_the_baseline, oom_dominating, structural_problem
from autotune.search.space import SearchSpace
from autotune.settings import SearchConfig, SweepConfig
from autotune.study.records import TrialRecord
from trials.contract.compose import compose
from trials.contract.outcomes import Outcome


def space_of(knobs: dict, *overrides: str, devices=None) -> SearchSpace:
    base = compose("sweep", list(overrides), with_choices=True, schema=SweepConfig)
    return SearchSpace.from_config(SearchConfig(name="t", knobs=knobs, devices=devices), base,
                                   list(overrides))


def test_baseline_is_the_composed_default_and_joins_the_choices():
    space = space_of({"precision": ["fp16"], "train.micro_batches": [2, 4],
                      "parallel.split": ["2x1x1"]})
    assert space.baseline == {"precision": "fp32", "train.micro_batches": 1,
                              "parallel.split": "1x1x1"}
    assert space.describe()["precision"] == ["fp32", "fp16"]
    assert space.size == 2 * 3 * 2
    assert space.overrides({"precision": "fp16", "train.micro_batches": 2,
                            "parallel.split": "2x1x1"})[-4:] == [
        "train.micro_batches=2", "parallel.dp=2", "parallel.mp=1", "parallel.pp=1"]


def test_neighbours_change_one_knob_at_a_time():
    space = space_of({"train.micro_batches": [1, 2], "runtime.mode": ["graph", "pynative"]})
    assert space.neighbours() == [{"train.micro_batches": 2, "runtime.mode": "graph"},
                                  {"train.micro_batches": 1, "runtime.mode": "pynative"}]


def test_structural_rules_name_the_reason():
    space = space_of({"parallel.split": ["1x1x1", "2x1x1", "1x2x1", "4x1x1"],
                      "precision": ["fp32", "bf16"]})
    base = {"parallel.split": "1x1x1", "precision": "fp32"}
    assert structural_problem(space, base)[1] is None
    assert "model parallel (parallel.mp=2) is not available on the CPU" in structural_problem(
        space, {**base, "parallel.split": "1x2x1"})[1]
    assert "hardware profile cpu has 2" in structural_problem(
        space, {**base, "parallel.split": "4x1x1"})[1]
    assert "bf16 is not available" in structural_problem(space, {**base, "precision": "bf16"})[1]


def test_a_space_is_searchable_when_one_point_besides_the_baseline_can_run():
    # 4x1x1 needs 4 devices of the CPU profile's 2, but 2x1x1 runs: something to search.
    assert only_the_baseline(space_of({"parallel.split": ["4x1x1", "2x1x1"]})) is None
    alone = only_the_baseline(space_of({"parallel.split": ["4x1x1"], "precision": ["bf16"]}))
    assert alone.startswith("every other point breaks a structural rule")
    assert only_the_baseline(space_of({"train.micro_batches": [1]})) == (
        "its only point is the baseline")


def test_job_size_rule_for_accelerator_spaces():
    space = space_of({"parallel.split": ["8x1x1", "2x2x2", "2x2x1"]}, "hardware=ascend_910b",
                     "parallel.dp=8", "train.global_batch=64", "train.micro_batches=2",
                     devices=8)
    assert structural_problem(space, {"parallel.split": "2x2x2"})[1] is None
    assert "uses 4 devices; the job has 8" in structural_problem(
        space, {"parallel.split": "2x2x1"})[1]


def oom_record(params, size):
    return TrialRecord(number=7, state="PRUNED", params=params, reason=Outcome.OOM, detail="",
                       launched=True, role="sampled", tokens_per_s=None, mfu=None,
                       peak_memory_gib=None, step_time_s=None, compile_s=None,
                       data_wait_share=None, micro_batch_size=size, started=None, wall_s=None,
                       trial_dir=None, reused_from=None)


def test_an_oom_rules_out_larger_micro_batches_with_the_other_knobs_equal():
    space = space_of({"train.micro_batches": [1, 2, 4], "runtime.mode": ["graph", "pynative"]})
    history = [oom_record({"train.micro_batches": 4, "runtime.mode": "graph"}, size=2)]
    bigger = {"train.micro_batches": 2, "runtime.mode": "graph"}
    whole_batch = {"train.micro_batches": 1, "runtime.mode": "graph"}
    other = {"train.micro_batches": 2, "runtime.mode": "pynative"}
    assert oom_dominating(bigger, space.trial_config(bigger), history).number == 7
    assert oom_dominating(other, space.trial_config(other), history) is None
    # Rule: one step over the whole batch keeps no accumulation buffer, so an OOM while
    # accumulating says nothing of it (image_cnn: 2 micro-batches peaked 0.52 GiB, 1 at
    # 0.49); nor an accumulating run of a smaller micro-batch.
    assert oom_dominating(whole_batch, space.trial_config(whole_batch), history) is None
    history = [oom_record({"train.micro_batches": 2, "runtime.mode": "graph"}, size=4)]
    assert oom_dominating(whole_batch, space.trial_config(whole_batch), history) is None
    smaller = {"train.micro_batches": 4, "runtime.mode": "graph"}
    assert oom_dominating(smaller, space.trial_config(smaller), history) is None


def test_an_oom_at_one_split_says_nothing_of_another():
    # The recorded CPU landscape: dp=2 at micro-batch size 2 ran out of a 0.62 GiB budget
    # per rank where dp=1 at size 4 peaked at 0.618 GiB (the optimum of bench/search_efficiency).
    space = space_of({"train.micro_batches": [1, 2, 4], "parallel.split": ["1x1x1", "2x1x1"]})
    history = [oom_record({"train.micro_batches": 4, "parallel.split": "2x1x1"}, size=1)]
    single = {"train.micro_batches": 4, "parallel.split": "1x1x1"}
    bigger = {"train.micro_batches": 2, "parallel.split": "2x1x1"}
    assert oom_dominating(single, space.trial_config(single), history) is None
    assert oom_dominating(bigger, space.trial_config(bigger), history).number == 7


def test_fast_trial_config_equals_a_full_hydra_compose():
    from trials.contract.schema import to_trial_config

    space = space_of({"precision": ["fp16"], "runtime.mode": ["pynative"],
                      "train.micro_batches": [2], "parallel.split": ["2x1x1"],
                      "train.recompute": ["full"]}, "workload=gpt_tiny")
    for point in [space.baseline, *space.neighbours()]:
        # Rule: merging field knobs into the cached group composition is what Hydra gives.
        assert space.trial_config(point) == to_trial_config(
            compose("sweep", space.overrides(point), schema=SweepConfig))


def test_a_points_config_is_built_once_and_each_caller_gets_its_own():
    import pytest

    from trials.contract.schema import ConfigError

    space = space_of({"train.micro_batches": [1, 2], "runtime.mode": ["graph", "pynative"]})
    point = {"train.micro_batches": 2, "runtime.mode": "graph"}
    first = space.trial_config(point)
    first.train.micro_batches = 7  # a caller changes its copy
    again = space.trial_config(point)
    # Rule: the same point gives the same config, untouched by what a caller did to one.
    assert again.train.micro_batches == 2 and again is not first
    assert again == space.trial_config(dict(point))
    # Rule: a point that cannot be built raises each time it is asked for.
    bad = {"train.micro_batches": 0, "runtime.mode": "graph"}
    for _ in range(2):
        with pytest.raises(ConfigError):
            space.trial_config(bad)


def test_a_bad_field_value_is_named():
    import pytest

    from trials.contract.schema import ConfigError

    with pytest.raises(ConfigError, match="search knob train.micro_batches=many"):
        space_of({"train.micro_batches": [1, "many"]})


def test_the_vocabulary_round_trips():
    import pytest

    from trials.contract.schema import ConfigError, DType
    from trials.contract.vocabulary import (
        PRECISIONS,
        Recompute,
        dtype_of,
        format_split,
        parse_split,
        precision_name,
        recompute_mode,
    )

    # Rule: a split parses to the numbers it was formatted from, and formats back to itself.
    for split in [(1, 1, 1), (2, 1, 1), (4, 2, 8), (16, 1, 2)]:
        assert parse_split(format_split(*split)) == split
    assert format_split(*parse_split("8x1x1")) == "8x1x1"
    assert parse_split("8X1X1") == (8, 1, 1)  # the capital a reader may type
    for bad in ["2x1", "0x1x1", "2,1,1", "axbxc", ""]:
        # Rule: anything but DPxMPxPP with positive integers is refused, naming the syntax.
        with pytest.raises(ConfigError, match="DPxMPxPP"):
            parse_split(bad)
    # Rule: each precision name maps to one dtype and back; every dtype has a name.
    assert {precision_name(dtype_of(name, "k")) for name in PRECISIONS} == set(PRECISIONS)
    assert set(PRECISIONS.values()) == set(DType)
    assert dtype_of("fp16", "k") is DType.float16 and precision_name(DType.bfloat16) == "bf16"
    # Rule: every recompute mode reads back as itself.
    assert [recompute_mode(m.value, "k") for m in Recompute] == list(Recompute)


def test_a_knob_in_an_old_spelling_is_refused_with_the_word_to_write():
    import pytest

    from trials.contract.schema import ConfigError

    for knobs, needle in [({"train.recompute": [False, True]},
                           "search knob train.recompute: 'false' is not a recompute mode; "
                           "write none (modes: none, selective, full, selective_op)"),
                          ({"precision": ["fp32", "float16"]},
                           "search knob precision: 'float16' is not a precision name; "
                           "write fp16 (names: fp32, fp16, bf16)")]:
        # Rule: search spaces take the commands' words; an old one is named with the fix.
        with pytest.raises(ConfigError) as info:
            space_of(knobs)
        assert str(info.value) == needle
    # Rule: the canonical words compose; full recompute is the trial's on.
    space = space_of({"train.recompute": ["none", "full"], "precision": ["fp32", "fp16"]})
    cfg = space.trial_config({"train.recompute": "full", "precision": "fp16"})
    assert cfg.train.recompute.value == "full" and cfg.precision.dtype.value == "float16"


def test_parallel_split_on_the_command_line_sets_the_three_fields():
    from trials.contract.schema import to_trial_config

    cfg = to_trial_config(compose("sweep", ["parallel.split=2x1x1"], schema=SweepConfig))
    # Rule: the split syntax of the search space works as an override of any command.
    assert (cfg.parallel.dp, cfg.parallel.mp, cfg.parallel.pp) == (2, 1, 1)
    assert cfg.parallel.split == "2x1x1"


def test_a_stored_trial_config_with_recompute_on_off_reads_as_a_mode(tmp_path):
    from omegaconf import OmegaConf

    from trials.contract.compose import load_resolved
    from trials.contract.schema import Recompute, to_trial_config

    stored = compose("trial", [])
    for old, mode in [(True, Recompute.full), (False, Recompute.none)]:
        node = OmegaConf.to_container(stored)
        node["train"]["recompute"] = old
        path = tmp_path / f"config-{old}.yaml"
        path.write_text(OmegaConf.to_yaml(node))
        # Rule: configs written before recompute had modes (reports of old studies) still load.
        assert to_trial_config(load_resolved(path, [])).train.recompute is mode


def test_a_stored_trial_config_with_a_retired_key_still_loads(tmp_path):
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    from trials.contract.compose import RETIRED_KEYS, load_resolved
    from trials.contract.schema import ConfigError, to_trial_config

    stored = OmegaConf.to_container(compose("trial", []))
    stored["hardware"]["cost"]["score_element_s"] = 2e-11  # written before it was retired
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(stored))
    assert "hardware.cost.score_element_s" in RETIRED_KEYS
    assert to_trial_config(load_resolved(path, [])).hardware.cost.compute_efficiency > 0
    # A key nobody retired is still refused.
    stored["hardware"]["cost"]["score_elements_s"] = 1.0
    path.write_text(OmegaConf.to_yaml(stored))
    with pytest.raises(ConfigKeyError):
        to_trial_config(load_resolved(path, []))
    # Named on a command line, it is refused with what replaced it, not a spelling hint.
    with pytest.raises(ConfigError, match="retired: the attention scores"):
        compose("trial", ["hardware.cost.score_element_s=1e-11"])


def test_the_model_seeds_timed_points_and_probes_an_untimed_term_it_ranks_first(monkeypatch):
    import optuna

    from autotune.plan.costmodel import CostModel
    from autotune.search.proposals import SEEDED, queue_best_predicted
    from trials.contract.schema import to_trial_config

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_of({"runtime.mode": ["graph", "pynative"], "train.micro_batches": [1, 2]})
    base = compose("sweep", [], with_choices=True, schema=SweepConfig)
    # This host's measured GEMM peak, as a trial leaves it in the cache (none on a fresh
    # machine until a real trial ran: the test must not depend on one having run first).
    monkeypatch.setattr("autotune.plan.costmodel.cached_cpu_peak_flops", lambda *_: 1e11)
    model = CostModel.for_profile(to_trial_config(base).hardware)
    # The CPU priors know nothing of PyNative's host cost (0 until calibrated), so the model
    # ranks PyNative first: the default study's fit of three graph-mode trials did, and its
    # three seeds were PyNative trials stopped as slow (-76 % against graph).
    pynative = {"runtime.mode": "pynative", "train.micro_batches": 1}
    graph_only = {"overhead:graph", "compute:float32", "layer:graph", "scores"}

    def queue_all(study, measured: set[str] | None) -> list[dict]:
        """The seeds as a sweep queues them: one at a time, each taken (asked and told)
        before the next is queued."""
        out: list[dict] = []
        evidence = {} if measured is None else {"measured_terms": lambda: measured}
        while got := queue_best_predicted(study, space, model, 8.0, 3, max_time_error=1.0,
                                          **evidence):
            assert len(got) == 1  # Rule: one at a time, and none while a point waits
            assert not queue_best_predicted(study, space, model, 8.0, 3, max_time_error=1.0,
                                            **evidence)
            out += got
            study.tell(study.ask(space.distributions()), 1.0)
        return out

    def seeds(measured: set[str]) -> list[dict]:
        return queue_all(optuna.create_study(direction="maximize"), measured)

    # Rule: with only graph-mode trials timed, one PyNative point goes first, as the probe
    # that times PyNative's terms (the model ranks it above every graph point); the rest
    # are graph points.
    first, *rest = seeds(graph_only)
    assert first["runtime.mode"] == "pynative"
    assert rest and all(p["runtime.mode"] == "graph" for p in rest)
    study = optuna.create_study(direction="maximize")
    queue_all(study, graph_only)
    assert [t.user_attrs["role"] for t in study.get_trials()] == ["probe", "predicted",
                                                                   "predicted"]
    # Rule: once per term: a probe stopped before its first timed step (PyNative slow in
    # its warm-up) leaves the term untimed, and the next queueing probes it no more.
    study.set_user_attr(SEEDED, None)
    again = queue_best_predicted(study, space, model, 8.0, 3, max_time_error=1.0,
                                 measured_terms=lambda: graph_only)
    assert all(p["runtime.mode"] == "graph" for p in again)
    # Rule: a probe that ran out of memory said nothing of time: the term is probed again.
    from optuna.trial import TrialState, create_trial

    oomed = optuna.create_study(direction="maximize")
    oomed.add_trial(create_trial(params=pynative, distributions=space.distributions(),
                                 state=TrialState.PRUNED,
                                 user_attrs={"role": "probe", "reason": "oom"}))
    first, *_ = queue_best_predicted(oomed, space, model, 8.0, 3, max_time_error=1.0,
                                     measured_terms=lambda: graph_only)
    assert first["runtime.mode"] == "pynative" and first != pynative
    # Rule: a trial of the sampler's stopped as slow answered as a probe would: PyNative is
    # not probed after the sampler's PyNative trials were stopped as slow.
    slowed = optuna.create_study(direction="maximize")
    slowed.add_trial(create_trial(params=pynative, distributions=space.distributions(),
                                  state=TrialState.PRUNED,
                                  user_attrs={"role": "sampled", "reason": "slow"}))
    picks = queue_best_predicted(slowed, space, model, 8.0, 3, max_time_error=1.0,
                                 measured_terms=lambda: graph_only)
    assert picks and all(p["runtime.mode"] == "graph" for p in picks)
    # Rule: no probe of a term the model ranks below a timed point while such a point is
    # unseen: with PyNative timed, graph (untimed, ranked below PyNative by these priors)
    # comes only after both PyNative points, as the probe of what is left.
    pynative_only = {"overhead:pynative", "compute:float32", "layer:pynative", "scores"}
    assert [p["runtime.mode"] for p in seeds(pynative_only)] == ["pynative", "pynative",
                                                                  "graph"]
    # Rule: once a PyNative trial was timed, its points may be seeded.
    with_pynative = graph_only | {"overhead:pynative", "layer:pynative"}
    assert any(p["runtime.mode"] == "pynative" for p in seeds(with_pynative))
    # Without the evidence gate (a simulated sweep's model is its own truth), every point.
    assert pynative in queue_all(optuna.create_study(direction="maximize"), None)
    # Rule: on a fresh machine (no measured peak yet) no time is predicted: no terms, no
    # seeds, and no crash.
    monkeypatch.setattr("autotune.plan.costmodel.cached_cpu_peak_flops", lambda *_: None)
    bare = CostModel.for_profile(to_trial_config(base).hardware)
    assert bare.time_terms(to_trial_config(base)) == set()
    study = optuna.create_study(direction="maximize")
    assert queue_best_predicted(study, space, bare, 8.0, 3, max_time_error=1.0,
                                measured_terms=lambda: graph_only) == []


def test_the_model_picks_nothing_the_slow_rule_would_stop(monkeypatch):
    from types import SimpleNamespace

    import optuna
    from optuna.trial import TrialState, create_trial

    from autotune.search.proposals import queue_best_predicted
    from autotune.study.view import StudyView

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_of({"runtime.mode": ["graph", "pynative"], "train.micro_batches": [1, 2]})
    # The model's ranking: graph mode three times PyNative (its error +-30 %).
    speed = {("graph", 1): 1000.0, ("graph", 2): 900.0,
             ("pynative", 1): 330.0, ("pynative", 2): 300.0}

    def predict(cfg):
        mode = getattr(cfg.runtime.mode, "value", cfg.runtime.mode)
        return SimpleNamespace(tokens_per_s=speed[mode, cfg.train.micro_batches],
                               over_budget=lambda budget: False)

    model = SimpleNamespace(predict_config=predict,
                            constants=SimpleNamespace(time_uncertainty=0.3, source="fake"))
    study = optuna.create_study(direction="maximize")
    for micro in (1, 2):
        params = {"runtime.mode": "graph", "train.micro_batches": micro}
        study.add_trial(create_trial(params=params, distributions=space.distributions(),
                                     value=1.0, state=TrialState.COMPLETE))
    fastest = SimpleNamespace(params={"runtime.mode": "graph", "train.micro_batches": 1})
    monkeypatch.setattr(StudyView, "best", lambda self, budget: fastest)

    def picks(slow_ratio: float) -> list[dict]:
        return queue_best_predicted(study, space, model, 8.0, 3, max_time_error=1.0,
                                    slow_ratio=slow_ratio)

    # Rule: with both graph points measured, what is left (PyNative, 0.33x the fastest's
    # prediction; 0.43x at the optimistic end) the slow rule at 0.5 would stop: no pick.
    assert picks(0.5) == []
    # ... one at 0.4 would not: the best of it is picked (as with no slow rule at all).
    assert picks(0.4) == [{"runtime.mode": "pynative", "train.micro_batches": 1}]


def test_an_unknown_override_of_a_loaded_config_names_the_fix(tmp_path):
    from omegaconf import OmegaConf

    from trials.contract.compose import load_resolved
    from trials.contract.schema import ConfigError

    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(compose("trial", [])))
    # Rule: an exported job's launch.sh loads its config file; a misspelt key there is the
    # same one line with the same fix as on a composed command line (it read "Key 'step'
    # is not in struct", no fix named).
    with pytest.raises(ConfigError, match=r"No such key \(run\.step\): check its spelling"):
        load_resolved(path, ["run.step=30"])
