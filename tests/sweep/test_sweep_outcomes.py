"""The orchestrator against a scripted fake trial: every way a trial can end.

``sweep.neighbours=true`` makes the order deterministic: the baseline first,
then one knob changed at a time, in the order the space lists the values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from optuna.trial import TrialState

FAST_STOPS = ("sweep.stop.compile_timeout_s=3", "sweep.stop.step_timeout_s=2",
              "sweep.stop.wall_timeout_s=30", "sweep.stop.slow_min_steps=2")

# data.prefetch is a convenient knob to script behaviours on: the fake ignores its meaning.
BEHAVIOURS = {1: "hang", 2: "crash", 3: "oom", 4: "diverged", 5: "unsupported",
              6: "hang_before_first_step", 7: "slow", 8: "sigkill", 9: "sigkill_at_budget"}
EXPECTED = {  # prefetch -> (reason, state)
    16: ("ok", TrialState.COMPLETE),
    1: ("hang", TrialState.FAIL),
    2: ("crash", TrialState.FAIL),
    3: ("oom", TrialState.PRUNED),
    4: ("diverged", TrialState.PRUNED),
    5: ("unsupported", TrialState.PRUNED),
    6: ("hang", TrialState.FAIL),
    7: ("slow", TrialState.PRUNED),
    # Killed by SIGKILL at 2 of 8 GiB, no kernel OOM kill: a crash, not a memory fact.
    8: ("crash", TrialState.FAIL),
    9: ("oom", TrialState.PRUNED),  # killed by SIGKILL with its peak at 95 % of the budget
}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_every_outcome_is_recorded_with_its_reason(harness):
    space = harness.space("edge", {"data.prefetch": [16, *BEHAVIOURS]})
    harness.script([{"when": {"data.prefetch": k}, "do": v} for k, v in BEHAVIOURS.items()])
    code, out, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=10",
                                 "sweep.max_failure_rate=1.0", *FAST_STOPS)
    assert code == 0, err
    trials = {t.params["data.prefetch"]: t for t in harness.study().trials}
    assert set(trials) == set(EXPECTED)
    for prefetch, (reason, state) in EXPECTED.items():
        t = trials[prefetch]
        assert (t.user_attrs["reason"], t.state) == (reason, state), (prefetch, t.user_attrs)
        assert t.user_attrs["launched"] is True
    # Rule: OOM is told with a positive memory constraint, so TPE avoids its neighbours.
    assert trials[3].constraints["memory_over_budget_gib"] > 0
    # Rule: a kill is oom only with evidence; otherwise a crash that says how it died.
    assert "the trial process killed by signal 9 (SIGKILL)" in trials[8].user_attrs["detail"]
    assert "peak RSS 2.00 of 8 GiB" in trials[8].user_attrs["detail"]
    assert "at peak RSS 7.60 GiB of its 8 GiB budget" in trials[9].user_attrs["detail"]
    assert trials[16].constraints["memory_over_budget_gib"] <= 0
    # Rule: a crash keeps the log tail for the human.
    assert "scripted crash" in trials[2].user_attrs["log_tail"]
    # Rule: the slow trial was stopped early, after its warm-up, with the reason's numbers.
    slow_steps = [t for t in trials[7].intermediate_values]
    assert 0 < len(slow_steps) < 5 and "tok/s" in trials[7].user_attrs["detail"]
    assert "no step progress for 2 s" in trials[1].user_attrs["detail"]
    assert "compile budget" in trials[6].user_attrs["detail"]
    # The leaderboard names every trial and where the study lives.
    assert "study: sqlite:///" in out and "hang" in out


def test_hung_trials_are_killed_whole_process_group_and_all(harness):
    harness.processes = True  # real processes: a hung one's whole group must be killed
    hangs = {1: "hang", 6: "hang_before_first_step"}
    space = harness.space("edge", {"data.prefetch": [16, *hangs]})
    harness.script([{"when": {"data.prefetch": k}, "do": v} for k, v in hangs.items()])
    code, out, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=3",
                                 "sweep.max_failure_rate=1.0", *FAST_STOPS)
    assert code == 0, err
    trials = {t.params["data.prefetch"]: t for t in harness.study().trials}
    # Rule: hung trials are killed, whole process group, no orphan left.
    for prefetch in hangs:
        assert trials[prefetch].user_attrs["reason"] == "hang"
        pid = int((Path(trials[prefetch].user_attrs["trial_dir"]) / "pid").read_text())
        assert not pid_alive(pid)
    assert "no step progress for 2 s" in trials[1].user_attrs["detail"]
    assert "compile budget" in trials[6].user_attrs["detail"]


def test_a_trials_child_that_left_its_group_and_marker_ends_with_the_command(harness):
    """A trial's child in a session of its own, its environment dropped (no marker to
    find it by), outlives its trial; ``python -m autotune`` adopts it (a subreaper) and
    kills it when the command ends."""
    import subprocess
    import sys

    from tests.conftest import ROOT, project_env

    space = harness.space("escape", {"train.micro_batches": [1, 2]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.n_trials=1")]
    env = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 4, "step_sleep": 0.02,
                                                "escape": True}))
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    (pid_file,) = (harness.runs / "s").glob("trial-*/escaped.pid")
    escaped = int(pid_file.read_text())
    assert not pid_alive(escaped), f"the escaped child {escaped} outlived the command"


def test_infeasible_and_oom_dominated_are_not_launched(harness):
    # global_batch 8: micro_batches 3 cannot divide it; micro_batches 4 (size 2) runs out of
    # memory, so micro_batches 2 (size 4, everything else equal, accumulating too) is ruled
    # out unlaunched.
    space = harness.space("mb", {"train.micro_batches": [8, 4, 2, 3]})
    harness.script([{"when": {"train.micro_batches": 4}, "do": "oom"}])
    code, out, err = harness.run(space, "train.micro_batches=8", "sweep.neighbours=true",
                                 "sweep.n_trials=10")
    assert code == 0, err
    trials = {t.params["train.micro_batches"]: t for t in harness.study().trials
              if t.user_attrs.get("reused_from") is None}
    assert trials[3].user_attrs["reason"] == "infeasible"
    assert "not divisible" in trials[3].user_attrs["detail"]
    assert trials[2].user_attrs["reason"] == "infeasible"
    assert "ran out of memory at micro-batch size 2" in trials[2].user_attrs["detail"]
    for mb in (3, 2):
        assert trials[mb].user_attrs["launched"] is False
        assert "trial_dir" not in trials[mb].user_attrs
    # Rule: the budget counts launches; an exhausted space ends the sweep with a message.
    assert "search space exhausted" in out
    launched = [t for t in harness.study().trials if t.user_attrs.get("launched")]
    assert len(launched) == 2
    assert len(list((harness.runs / "s").glob("trial-*"))) == 2


def test_identical_proposals_reuse_the_earlier_result(harness):
    space = harness.space("two", {"train.micro_batches": [1, 2]})
    harness.script()
    code, out, err = harness.run(space, "sweep.n_trials=5", "sweep.n_startup_trials=20",
                                 "sweep.seed=3")
    assert code == 0, err
    study = harness.study()
    launched = [t for t in study.trials if t.user_attrs.get("launched")]
    reused = [t for t in study.trials if t.user_attrs.get("reused_from") is not None]
    # Two distinct points: each launched once, every repeat reuses the measured value.
    assert sorted(t.params["train.micro_batches"] for t in launched) == [1, 2]
    for t in reused:
        original = study.trials[t.user_attrs["reused_from"]]
        assert t.params == original.params and t.value == original.value
    # Rule: the sampler draws again rather than repeat a measured point, so the space is
    # exhausted after two proposals (a queued repeat: tests/search/test_no_repeats.py).
    assert len(study.trials) == 2 and not reused
    assert "search space exhausted" in out


def test_failure_rate_above_the_limit_ends_the_sweep(harness):
    space = harness.space("crashy", {"train.micro_batches": [1, 2, 4, 8]})
    harness.script([{"when": {"train.micro_batches": m}, "do": "crash"} for m in (2, 4, 8)])
    code, out, err = harness.run(space, "sweep.n_trials=4", "sweep.min_trials_for_failure_rate=2",
                                 "sweep.max_failure_rate=0.5")
    assert code == 1
    # Rule: the baseline ran ok, then 2 of 3 launches crashed (> 0.5): the sweep ends there.
    assert "sweep.max_failure_rate=0.5" in out
    assert sum(1 for t in harness.study().trials if t.user_attrs.get("launched")) == 3


@pytest.mark.parametrize("do, reason", [("crash", "crash"), ("config_error", "config_error")])
def test_a_baseline_that_cannot_run_ends_the_sweep_with_its_log(harness, do, reason):
    space = harness.space("doomed", {"train.micro_batches": [1, 2, 4]})
    harness.script([{"when": {"train.micro_batches": 1}, "do": do}])
    code, out, err = harness.run(space, "sweep.n_trials=3")
    assert code == 1
    # Rule: nothing can be learned from the rest when the baseline itself cannot run.
    assert f"stopped: the baseline (trial 0) ended {reason}" in out
    assert "--- stderr.log" in out  # its log tail is shown
    assert sum(1 for t in harness.study().trials if t.user_attrs.get("launched")) == 1


def test_best_trial_is_the_fastest_feasible(harness):
    space = harness.space("speed", {"train.micro_batches": [1, 2, 4], "runtime.threads": [2, 1]})
    harness.script()
    code, _, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=4")
    assert code == 0, err
    study = harness.study()
    # The fake's throughput is 1000 x threads / micro_batches: the baseline (mb 1, thr 2) wins.
    assert study.best_trial.params == {"train.micro_batches": 1, "runtime.threads": 2}
    assert study.best_value == 2000.0
    assert study.trials[0].user_attrs["role"] == "baseline"


def test_pareto_objective_keeps_the_front_and_export_honours_headroom(harness, tmp_path):
    from autotune.cli import main

    space = harness.space("front", {"train.micro_batches": [1, 2, 4]})
    harness.script()
    code, _, err = harness.run(space, "sweep.objective=pareto", "sweep.neighbours=true",
                               "sweep.n_trials=3")
    assert code == 0, err
    study = harness.study()
    assert len(study.directions) == 2
    # The fake trades speed for memory: every micro-batch count is on the front.
    front = sorted(t.params["train.micro_batches"] for t in study.best_trials)
    assert front == [1, 2, 4]
    # Resuming a Pareto study as a single-objective one is refused.
    code, _, err = harness.run(space, "sweep.n_trials=4")
    assert code == 2 and "another objective" in err
    out = tmp_path / "export"
    code = main(["export", *harness.overrides(space, "sweep.objective=pareto"),
                 f"export.out={out}", "export.min_headroom_gib=7"])
    assert code == 0
    provenance = json.loads((out / "provenance.json").read_text())
    # Budget 8 GiB: micro_batches 2 (1 GiB) is the fastest with >= 7 GiB headroom.
    assert provenance["params"] == {"train.micro_batches": 2}
    assert "under export.min_headroom_gib=7" in provenance["chosen_because"]


def test_a_baseline_that_diverges_at_step_1_ends_the_sweep_naming_the_workload(harness):
    space = harness.space("nanloss", {"train.micro_batches": [1, 2, 4]})
    harness.script([{"when": {}, "do": "nan_from_start"}])
    code, out, _ = harness.run(space, "sweep.n_trials=3")
    # Rule: no finite loss from the baseline's first step is the workload's fault, not a
    # knob's: the sweep stops after it, exit 1, instead of spending its budget.
    assert code == 1
    assert "stopped: every trial diverged at step 1: the workload, not a knob" in out
    assert sum(1 for t in harness.study().trials if t.user_attrs.get("launched")) == 1


def test_with_precision_in_the_space_every_trial_diverging_ends_with_exit_1(harness):
    space = harness.space("nanprec", {"precision": ["fp32", "fp16"],
                                      "train.micro_batches": [1, 2]})
    harness.script([{"when": {}, "do": "nan_from_start"}])
    code, out, _ = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true")
    # Rule: float16 may overflow where float32 does not, so the sweep goes on after the
    # baseline; when nothing completed at all it still fails, saying why in one line.
    assert code == 1
    assert "every trial diverged at step 1: the workload, not a knob: all 3 launched" in out
    assert sum(1 for t in harness.study().trials if t.user_attrs.get("launched")) == 3


def test_a_sweep_in_which_nothing_completed_fails_with_the_count(harness):
    space = harness.space("nothing", {"train.micro_batches": [1, 2, 4]})
    harness.script([{"when": {"train.micro_batches": 1}, "do": "diverged"},
                    {"when": {"train.micro_batches": 2}, "do": "crash"},
                    {"when": {"train.micro_batches": 4}, "do": "oom"}])
    code, out, _ = harness.run(space, "sweep.n_trials=3", "sweep.neighbours=true",
                               "sweep.max_failure_rate=1.0")
    assert code == 1
    # Rule: a sweep without one completed trial names what its trials ended as.
    line = next(x for x in out.splitlines() if x.startswith("stopped: no trial completed"))
    assert sorted(line.split(": ")[2].split(";")[0].split(", ")) == [
        "1 crash", "1 diverged", "1 oom"]


def test_a_baseline_killed_from_outside_is_not_called_the_workloads_fault():
    """A baseline crash by SIGKILL/SIGTERM (no sign of memory) stops the sweep, saying the
    signal came from outside; a crash of its own (SIGSEGV, an exit code) says the others
    would fail the same way."""
    from autotune.study.budget import fatal_baseline
    from autotune.study.result import TrialResult
    from trials.contract.outcomes import Outcome

    killed = TrialResult(Outcome.CRASH, detail="msrun killed by signal 9 (SIGKILL)",
                         exit_code=-9)
    assert "stopped from outside" in fatal_baseline(0, killed).message
    assert "would fail the same way" not in fatal_baseline(0, killed).message
    own = TrialResult(Outcome.CRASH, detail="python killed by signal 11 (SIGSEGV)",
                      exit_code=-11)
    assert "would fail the same way" in fatal_baseline(0, own).message
    assert fatal_baseline(0, TrialResult(Outcome.SLOW)) is None


def test_a_cost_model_without_a_peak_says_it_proposes_no_trial(harness, monkeypatch,
                                                               tmp_path):
    space = harness.space("m", {"train.micro_batches": [1, 2]})
    harness.script()
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "empty-cache"))  # no CPU peak here
    code, out, _ = harness.run(space, "sweep.n_trials=2")
    # Rule: the model that cannot predict a step time says so once, with the fix, where the
    # sweep names it (its first launches were all the sampler's, without a word).
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("cost model:"))
    assert "until it has a peak FLOP/s it predicts memory only and proposes no trial" in line
    assert "the baseline" in line and "calibrate-host" in line
