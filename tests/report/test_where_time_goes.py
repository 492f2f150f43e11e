"""autotune.report.where_time_goes: the winner's profile, or what its scorecard says."""

from __future__ import annotations

import dataclasses

from autotune.report.where_time_goes import FIGURE, TimeSection, html_lines, markdown, section
from autotune.study.schema.profile import ProfileResult
from tests.fakes import rec


def stored(trial: int) -> ProfileResult:
    p = {"steps": 3, "step_s": 0.1, "unprofiled_step_s": 0.09, "overhead": 1.1,
         "seconds": {"forward": 0.04, "data_wait": 0.06},
         "shares": {"forward": 0.4, "data_wait": 0.6},
         "top_ops": [{"type": "MatMul", "category": "forward", "calls_per_step": 4,
                      "ms_per_step": 30.0, "share": 0.3}],
         "memory": {"source": "host RSS", "peak_mib": 20.0, "mean_mib": 10.0,
                    "peak_over_mean": 2.0, "t_s": [0.0, 0.1], "mib": [10.0, 20.0]}}
    return ProfileResult.from_json({
        "trial": trial, "profile": p, "dir": f"profiles/{trial}",
        "findings": [{"rule": "data_wait", "trials": [trial], "sentence": "waits"},
                     {"rule": "dominant_op", "trials": [trial], "sentence": "MatMul"}]})


def test_the_best_trials_profile_is_shown_with_its_figure(tmp_path):
    best = rec(1, tokens_per_s=100.0)
    s = section([best], {1: stored(1), 2: stored(2)}, best, tmp_path)
    # Rule: the best trial's own profile is the one shown (not the latest), the figure
    # written beside it.
    assert s.lines[0].startswith("Trial #1, 3 steps profiled")
    assert s.figure == FIGURE and (tmp_path / FIGURE).is_file()
    assert "| data_wait | 60.00 | 60.0 % |" in s.lines
    # Rule: the findings are the stored profile's, less whether the step is input-bound:
    # the diagnosis says that first, by the same rule (study/data_bound.py).
    assert [f.rule for f in s.findings] == ["dominant_op"]
    assert f"[![Where the time goes]({FIGURE})]({FIGURE})" in markdown(s)


def test_without_the_best_trials_profile_the_latest_is_shown_and_says_so(tmp_path):
    best = rec(5, tokens_per_s=100.0)
    s = section([best], {1: stored(1), 3: stored(3)}, best, tmp_path)
    # Rule: another trial's profile (the latest) stands in, and the note says how to
    # profile the best one.
    assert "Not the pick (#5)" in s.lines[0] and "profile.trial=5" in s.lines[0]
    assert any(line.startswith("Trial #3,") for line in s.lines)


def test_no_profile_falls_back_to_the_scorecard_and_its_rules(tmp_path):
    best = rec(4, tokens_per_s=100.0, card={"performance": {
        "data_wait_share": 0.5, "tokens_per_step": 20.0, "tokens_per_s": 100.0,
        "comm_share": 0.4}})
    s = section([best], {}, best, tmp_path)
    # Rule: no figure; the command to profile it; its data wait from the measured steps;
    # the scorecard judged by the profile's own rules, less input-bound (the diagnosis').
    assert s.figure is None and not (tmp_path / FIGURE).exists()
    assert "profile.trial=4" in s.lines[0] and "data wait 50.0 %" in s.lines[1]
    assert [f.rule for f in s.findings] == ["communication"]
    # Rule: no completed trial, nothing to say where the time goes.
    assert section([], {}, None, tmp_path).lines == [
        "No completed trial to say where its time goes."]


def test_html_escapes_the_lines():
    out = html_lines(TimeSection(lines=["a <b> & c"]), None)
    # Rule: the lines are escaped inside <pre>; no image without a source.
    assert out == ["<h2>Where the time goes</h2>", "<pre>a &lt;b&gt; &amp; c</pre>"]


def test_a_profile_measured_under_load_says_so_before_its_times(tmp_path):
    from autotune.study.conditions import Conditions

    best = rec(1, tokens_per_s=100.0)
    loaded = stored(1)
    loaded.conditions = Conditions(other_cores=1.3, window_s=4.0).judge(0.5)
    s = section([best], {1: loaded}, best, tmp_path)
    # Rule: the report reads the stored conditions as the command did: the note first.
    assert s.lines[0].startswith("Measured under load (load 1.3: other processes 1.30 cores")
    assert s.lines[2].startswith("Trial #1, 3 steps profiled")
    # Rule: sizes under 1 MiB read in KiB, as profile prints them.
    memory = dataclasses.replace(loaded.profile.memory, peak_mib=0.5, mean_mib=0.25)
    loaded.profile = dataclasses.replace(loaded.profile, memory=memory)
    memory = next(line for line in section([best], {1: loaded}, best, tmp_path).lines
                  if line.startswith("Memory"))
    assert "peak 512.0 KiB, mean 256.0 KiB" in memory
