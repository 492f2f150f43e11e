"""autotune.soak.report: a soak's result summarised, printed, plotted, and as the exported
job's README section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import optuna

from autotune.settings import SoakSettings
from autotune.soak.attempts import Attempt
from autotune.soak.plan import SoakPlan
from autotune.soak.report import plot, render, soak_section, summarise
from autotune.study.schema.soak import SoakVerdict, store_soak
from trials.contract.events import Phase, StepRecord

MIB = 1 / 1024
PNG = b"\x89PNG\r\n\x1a\n"


def steps(n: int, leak_mib_per_step: float) -> list[StepRecord]:
    rng = np.random.default_rng(0)
    return [StepRecord(step=i, phase=Phase.COMPILE if i == 0 else Phase.TRAIN,
                       loss=3.0 + 0.01 * rng.standard_normal(), grad_norm=1.0,
                       step_s=0.03 * (1 + 0.01 * rng.random()), data_wait_s=0.0, tokens=256,
                       peak_rss_gib=1.0, rss_gib=0.5 + leak_mib_per_step * MIB * i)
            for i in range(n)]


def plan(n: int) -> SoakPlan:
    return SoakPlan(trial=3, why="best", config=Path("c.yaml"), steps=n, steps_from="steps",
                    checkpoint_every=50, kill_at=0.0, kill_from=None, replay=0,
                    planned_kill=None, overrides=[], step_s=0.03, world_size=1)


def test_a_leaking_run_is_flagged_and_the_result_is_json_safe(tmp_path):
    attempt = Attempt(index=0, steps=steps(300, leak_mib_per_step=1.0), exit_code=0)
    r = summarise(plan(300), [attempt], None, SoakSettings(), 9.0, tmp_path)
    # Rule: 1 MiB a step (100 MiB / 100 steps) is over the 20 MiB threshold: a leak.
    assert r.leak is True and r.finished is True and r.exit_code == 0
    # Rule: the last verdict says how far it got.
    assert r.verdicts[-1] == "finished: 300 of 300 steps in 1 launch(es), 9.0 s"
    # Rule: the result is strict JSON (stored on the study and in soak.json).
    json.dumps(r.to_json(), allow_nan=False)
    text = render(SoakVerdict.from_json(r.to_json()))
    assert "anonymous memory first -> last" in text and "its growth within a launch" in text
    assert "- finished: 300 of 300" in text


def test_a_steady_run_has_no_leak_and_a_failed_one_exits_1(tmp_path):
    attempt = Attempt(index=0, steps=steps(300, leak_mib_per_step=0.0), exit_code=0)
    r = summarise(plan(300), [attempt], "crash at step 300", SoakSettings(), 9.0, tmp_path)
    # Rule: flat memory is no leak; a failure is the last verdict and exit code 1.
    assert r.leak is False
    assert r.verdicts[-1] == "FAILED: crash at step 300" and r.exit_code == 1


def test_the_plot_is_written_or_says_there_was_no_step(tmp_path):
    attempt = Attempt(index=0, steps=steps(120, 1.0), exit_code=0)
    r = summarise(plan(120), [attempt], None, SoakSettings(), 4.0, tmp_path)
    # Rule: a figure of the run; a placeholder when the run made no step.
    verdict = SoakVerdict.from_json(r.to_json())
    assert plot([attempt], verdict, tmp_path / "soak.png").read_bytes().startswith(PNG)
    empty = plot([Attempt(index=0)], verdict, tmp_path / "none.png")
    assert empty.read_bytes().startswith(PNG)


def test_the_readme_section_is_only_for_the_soaked_trial(tmp_path):
    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    attempt = Attempt(index=0, steps=steps(300, 1.0), exit_code=0)
    store_soak(study, summarise(plan(300), [attempt], None, SoakSettings(), 9.0, tmp_path))
    section = soak_section(study, 3, plot="soak.png")
    # Rule: the soaked trial's section states the leak and links the figure.
    assert section.startswith("## Soak") and "**leak**" in section
    assert "[![Soak](soak.png)](soak.png)" in section and "not killed and resumed" in section
    # Rule: another trial (not soaked) gets no section.
    assert soak_section(study, 4) == ""
    # Rule: the section names the trial it soaked, and the report says when that is not the
    # pick (confirm changed it after the soak: a new user read "ran this configuration"
    # under a report about another trial).
    from autotune.commands.report import soak_markdown

    assert "`python -m autotune soak` ran trial #3 for" in section
    assert "not the pick" not in soak_markdown(study, tmp_path / "r", pick=3)
    assert "This soak ran trial #3, not the pick (trial #0)" in soak_markdown(
        study, tmp_path / "r", pick=0)


def test_the_verdicts_say_what_other_processes_did_to_the_host(tmp_path):
    from autotune.study.conditions import Conditions

    def verdicts(other_cores: float | None) -> list[str]:
        conditions = None if other_cores is None else Conditions(other_cores=other_cores,
                                                                  window_s=30.0)
        attempt = Attempt(index=0, steps=steps(300, leak_mib_per_step=0.0), exit_code=0,
                          conditions=conditions)
        return summarise(plan(300), [attempt], None, SoakSettings(), 9.0, tmp_path,
                         contention_cores=0.5).verdicts

    # Rule: two soaks of one job on one host can disagree on drift when other processes
    # came between them: the load each launch met is said, beside the drift verdict.
    loaded = [v for v in verdicts(1.3) if v.startswith("host:")]
    assert loaded == ["host: other processes used 1.30 cores over a launch (above "
                      "sweep.contention_cores=0.5): a throughput drift may be theirs, not "
                      "the job's; soak again on a quiet host to tell"]
    assert any(v.startswith("host: quiet (other processes used at most 0.10 cores")
               for v in verdicts(0.1))
    assert not any(v.startswith("host:") for v in verdicts(None))  # not measured: not said


def test_each_trials_soak_is_kept_and_an_old_single_soak_reads_as_its_trials(tmp_path):
    from dataclasses import replace

    from autotune.commands.report import soak_markdown
    from autotune.study.schema import keys
    from autotune.study.schema.soak import last_soak, soak_of, stored_soaks

    study = optuna.create_study(storage="sqlite:///" + str(tmp_path / "s.db"))
    attempt = Attempt(index=0, steps=steps(300, 1.0), exit_code=0)
    leaking = summarise(plan(300), [attempt], None, SoakSettings(), 9.0, tmp_path)
    steady = replace(summarise(plan(300), [Attempt(index=0, steps=steps(300, 0.0),
                                                   exit_code=0)],
                               None, SoakSettings(), 9.0, tmp_path), trial=0)
    store_soak(study, leaking)
    store_soak(study, steady)
    # Rule: soaking trial 0 after trial 3 keeps trial 3's (it replaced it: export then
    # wrote "Not soaked yet" for a soaked trial); each trial's section reads its own.
    assert sorted(stored_soaks(study)) == [0, 3] and last_soak(study).trial == 0
    assert soak_of(study, 3).leak and not soak_of(study, 0).leak
    assert "**leak**" in soak_section(study, 3) and "**leak**" not in soak_section(study, 0)
    # Rule: the report shows the pick's soak, not merely the latest.
    assert "ran trial #3" in soak_markdown(study, tmp_path / "r", pick=3)
    # Rule: a soak stored before soaks were kept by trial (one verdict) is its trial's.
    old = optuna.create_study(storage="sqlite:///" + str(tmp_path / "old.db"))
    old.set_user_attr(keys.SOAK, leaking.to_json())
    assert list(stored_soaks(old)) == [3] and soak_of(old, 3).leak and soak_of(old, 0) is None
