"""``confirm`` on scripted trials: the order inside each round is shuffled, and a machine
whose speed changed since the sweep is said so."""

from __future__ import annotations

import re

from autotune.cli import main


def _confirm(harness, capsys, space: str, *extra: str) -> tuple[int, str]:
    code = main(["confirm", *harness.overrides(space), *extra])
    return code, capsys.readouterr().out


def test_the_order_inside_each_round_is_shuffled_and_stored(harness, capsys):
    space = harness.space("c1", {"train.micro_batches": [1, 2, 4]})
    harness.script(steps=6, step_sleep=0.005)
    code, out, err = harness.run(space, "sweep.n_trials=3", "sweep.sampler=grid",
                                 "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err + out
    code, out = _confirm(harness, capsys, space, "confirm.top_k=3", "confirm.repeats=4")
    assert code == 0, out
    printed = [tuple(int(n) for n in m.split(", "))
               for m in re.findall(r"round \d+: trials ([\d, ]+)", out)]
    stored = [tuple(order) for order in harness.study().user_attrs["autotune.confirm_order"]]
    # Rule: every round runs every finalist once, in the order printed and stored...
    assert printed == stored and len(stored) == 4
    finalists = sorted(stored[0])
    assert len(finalists) == 3 and all(sorted(order) == finalists for order in stored)
    # ... and the order is not the same fixed one in every round (seeded shuffle).
    assert len(set(stored)) > 1
    runs = re.findall(r"confirm \d+/12: trial (\d+)", out)
    assert [int(n) for n in runs] == [n for order in stored for n in order]


def test_a_machine_that_slowed_down_since_the_sweep_is_said_so(harness, capsys):
    space = harness.space("c2", {"train.micro_batches": [1, 2]})
    harness.script(steps=6, step_sleep=0.005)
    code, out, err = harness.run(space, "sweep.n_trials=2", "sweep.stop.slow_ratio=0",
                                 "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err + out
    code, quiet = _confirm(harness, capsys, space, "confirm.top_k=2", "confirm.repeats=2")
    # Rule: at the sweep's speed, no note.
    assert code == 0 and "machine's speed changed" not in quiet
    harness.script(steps=6, step_sleep=0.005, slowdown=3.0)  # every step 3x slower now
    code, slowed = _confirm(harness, capsys, space, "confirm.top_k=2", "confirm.repeats=2")
    # Rule: the baseline running 3x slower than in the sweep is said, with both figures.
    assert code == 0 and "machine's speed changed" in slowed
    assert "(0.33x)" in slowed


def test_the_sweep_re_measures_the_baseline_and_pairs_gains_in_time(harness, capsys):
    """The machine slows down 2x after the 4th trial process (every configuration runs
    at the same speed): a trial measured after the slowdown is compared with the baseline
    re-measured after it, not with the baseline's first run."""
    space = harness.space("c3", {"runtime.jit_level": ["O0", "O1"],
                                 "data.num_workers": [1, 2], "data.prefetch": [2, 4]})
    counter = harness.tmp / "processes"
    harness.script(steps=6, step_sleep=0.005, slowdown=2.0, slowdown_after=4,
                   counter=str(counter))
    code, out, err = harness.run(space, "sweep.n_trials=6", "sweep.baseline_every=2",
                                 "sweep.sampler=random", "sweep.stop.slow_ratio=0",
                                 "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err + out
    study = harness.study()
    checks = [r for r in study.user_attrs["autotune.repeats"]["0"]
              if r["source"] == "baseline-check"]
    # Rule: every 2 launches (before the next one), the baseline runs again: 2 checks.
    assert len(checks) == 2 and all(r["at"] for r in checks)
    assert (harness.runs / "s" / "trial-0000" / "check-1" / "metrics.jsonl").exists()
    assert "baseline (trial 0) re-measured" in out and "machine's speed changed" in out
    from autotune.study import selection
    from autotune.study.records import load_records

    records = load_records(study)
    selection.annotate(records, 0.05)
    last = max((r for r in records if r.launched and r.number != 0), key=lambda r: r.number)
    # Rule: the last trial (2x slower, like the baseline check beside it) is within noise
    # of the baseline: its gain is measured against the baseline run next to it in time.
    assert abs(last.vs_baseline.ratio) < 0.05 and not last.vs_baseline.real
    # The baseline's first run alone would have called it 50 % slower.
    from autotune.study import noise

    first = noise.compare(noise.runs_of(last), noise.runs_from([records[0].perf]),
                          noise.Noise(0.05, "test"))
    assert first.ratio < -0.4 and first.real
    # Rule: the table says its gains rest on the runs around each trial, which a trial's
    # own progress line (printed when it ended) could not have had.
    # (5 times: its first run, 2 checks, and 2 rounds of the final race, which it enters
    # because the best is not separably faster than its runs beside it.)
    ran = len(records[0].timed_runs())
    assert ran == 5 and f"the baseline ran {ran} times" in out and "may have moved since" in out
    import dataclasses

    from autotune.report import leaderboard

    once = [dataclasses.replace(r, repeats=[]) if r.number == 0 else r for r in records]
    assert leaderboard.rebracketed_note(once) == ""  # a baseline that ran once: nothing moved


def _slowed_sweep(harness, study: str, *extra: str):
    """A machine that runs 3x slower from the 4th trial process on; every configuration
    runs at the same speed, so none of them is really slow."""
    space = harness.space("c4", {"runtime.jit_level": ["O0", "O1"],
                                 "data.num_workers": [1, 2], "data.prefetch": [2, 4]})
    # Steps slow enough (0.1 s) that the follow loop judges them while the trial runs: a
    # trial that ended before the slow rule saw its steps is kept, whatever they say.
    harness.script(steps=10, step_sleep=0.1, slowdown=3.0, slowdown_after=3,
                   counter=str(harness.tmp / f"processes-{study}"))
    code, out, err = harness.run(space, "sweep.n_trials=5", "sweep.sampler=random",
                                 "sweep.stop.slow_min_steps=3", *extra, study=study)
    assert code == 0, err + out
    return [t.user_attrs.get("reason") for t in harness.study(study).trials
            if t.user_attrs.get("launched")]


def test_the_slow_rule_judges_against_the_best_as_fast_as_the_machine_runs_now(harness):
    # Rule: re-measuring the baseline (every launch here) scales the best by the drift,
    # so trials that are as fast as the best, on a machine that slowed down, finish.
    paired = _slowed_sweep(harness, "paired", "sweep.baseline_every=1")
    assert paired and "slow" not in paired
    # Without it, the same trials are thrown away as slow (what the drift did before).
    unpaired = _slowed_sweep(harness, "unpaired", "sweep.baseline_every=0")
    assert "slow" in unpaired


def test_a_baseline_that_missed_its_precision_target_is_flagged_and_measured_again(
        harness, capsys):
    space = harness.space("c5", {"data.prefetch": [2, 4]})
    # Step times alternating 0.4x / 1.6x: the median's interval is far wider than +-2 %.
    harness.script(steps=8, step_sleep=0.005, jitter=0.6)
    code, out, err = harness.run(space, "sweep.n_trials=2", "sweep.baseline_every=0",
                                 "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err + out
    study = harness.study()
    # Rule: the baseline is flagged imprecise, with by how much...
    assert "interval" in study.trials[0].user_attrs["imprecise"]
    # ... and measured again before the next launch, though baseline_every is 0.
    checks = [r for r in study.user_attrs["autotune.repeats"]["0"]
              if r["source"] == "baseline-check"]
    assert len(checks) == 1 and "baseline (trial 0) re-measured" in out


def test_an_imprecise_baseline_measured_before_this_run_is_measured_again_first(harness):
    space = harness.space("c5b", {"data.prefetch": [2, 4]})
    harness.script(steps=8, step_sleep=0.005, jitter=0.6)
    common = ("sweep.baseline_every=0", "sweep.stop.slow_ratio=0",
              "sweep.stop.slow_warmup_ratio=0")
    # The baseline alone, imprecise, and the run ends (as tune's data stage measures it
    # before the throughput stage's sweep, or a sweep stopped right after it).
    code, out, err = harness.run(space, "sweep.n_trials=1", *common)
    assert code == 0, err + out
    assert "interval" in harness.study().trials[0].user_attrs["imprecise"]
    assert not harness.study().user_attrs.get("autotune.repeats", {}).get("0")
    # Rule: the next run measures it again before its first launch (a new user's tune did
    # not: the request lived in the process that measured it).
    code, out, err = harness.run(space, "sweep.n_trials=2", *common)
    assert code == 0, err + out
    checks = [r for r in harness.study().user_attrs["autotune.repeats"]["0"]
              if r["source"] == "baseline-check"]
    assert len(checks) == 1 and "baseline (trial 0) re-measured" in out


PICK = re.compile(r"pick \(what export and soak take\): trial #(\d+)")


def test_the_sweep_confirm_report_export_and_soak_name_one_winner(harness, capsys):
    """threads=4 is 2x the baseline's speed in the scripted trial: a separable winner that
    every command must name, by the one verdict (autotune/study/choice.study_verdict)."""
    from autotune.settings import SoakSettings, SweepConfig
    from autotune.soak.plan import pick_trial
    from autotune.study.records import load_records
    from trials.contract.compose import compose

    space = harness.space("c6", {"runtime.threads": [2, 4], "train.micro_batches": [1, 2]})
    harness.script(steps=6, step_sleep=0.005)
    code, swept, err = harness.run(space, "sweep.n_trials=4", "sweep.sampler=grid",
                                   "sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err + swept
    code, confirmed = _confirm(harness, capsys, space, "confirm.top_k=2", "confirm.repeats=2")
    assert code == 0, confirmed
    assert main(["report", *harness.overrides(space)]) == 0
    reported = capsys.readouterr().out
    assert main(["export", *harness.overrides(space), f"export.out={harness.tmp / 'job'}"]) == 0
    exported = capsys.readouterr().out
    composed = compose("sweep", harness.overrides(space), schema=SweepConfig)
    study = harness.study()
    soaked, _ = pick_trial(study, load_records(study), composed, SoakSettings())
    winner = next(t.number for t in study.trials if t.params.get("runtime.threads") == 4
                  and t.params.get("train.micro_batches") == 1 and t.value)
    # Rule: the sweep's summary, confirm, the report, export and soak name one trial.
    named = {PICK.findall(swept)[-1], PICK.findall(confirmed)[-1], PICK.findall(reported)[-1],
             re.search(r"exported trial (\d+)", exported).group(1), str(soaked.number)}
    assert named == {str(winner)}, (named, winner)
    # Rule: the figure beside it is labelled: confirm's median, and the sweep's own.
    assert re.search(rf"trial #{winner} \([^)]*\): median [\d,]+ tokens/s over 2 confirm re-runs",
                     confirmed)
    assert re.search(rf"^\s*trial\s+sweep tok/s\s+median.*\n\s*{winner}\s+[\d,]+\s", confirmed,
                     re.M)
    # The top two are the winner and the baseline: no "top two" line repeats its row's test.
    assert "top two" not in confirmed


def test_a_round_measured_under_load_is_left_out_of_the_paired_test():
    from autotune.commands.confirm import rounds_of

    runs = {0: [100.0, 102.0, 60.0], 1: [110.0, 111.0, 112.0]}
    loaded = {0: [False, False, True], 1: [False, False, False]}
    # Rule: the baseline's run in round 3 was measured under load: the pair was measured
    # under different conditions, and the test keeps the two clean rounds.
    assert rounds_of(runs, 1, 0, loaded) == ([110.0, 111.0], [100.0, 102.0])
    # Rule: a round where both ran under load compares like with like and counts; one
    # where only one of the two did never counts, however few rounds remain.
    loaded[1] = [True, False, True]
    assert rounds_of(runs, 1, 0, loaded) == ([111.0, 112.0], [102.0, 60.0])
    loaded[1] = [False, False, True]
    assert rounds_of(runs, 1, 0, loaded) == ([110.0, 111.0, 112.0], [100.0, 102.0, 60.0])
    # Rule: a failed run drops its round, as before.
    assert rounds_of({0: [100.0, None], 1: [110.0, 111.0]}, 1, 0) == ([110.0], [100.0])
    # The case met under a 30 s on / 30 s off hog: the baseline loaded in every round, the
    # finalist in none. No round compares like with like: no paired test, no claim.
    from autotune.study.noise import paired_test

    runs = {0: [1754.0, 1711.0, 1775.0], 1: [2701.0, 2606.0, 2765.0]}
    loaded = {0: [True, True, True], 1: [False, False, False]}
    assert rounds_of(runs, 1, 0, loaded) == ([], [])
    assert paired_test(*rounds_of(runs, 1, 0, loaded)) is None


def test_confirm_runs_the_baseline_plus_top_k_other_configurations():
    from autotune.commands.confirm import confirm_finalists
    from autotune.study.records import TrialRecord
    from trials.contract.outcomes import Outcome

    def record(number, tps, params, reused_from=None):
        return TrialRecord(
            number=number, state="COMPLETE", params=params, reason=Outcome.OK, detail="",
            launched=reused_from is None, role="baseline" if number == 0 else "",
            tokens_per_s=tps, mfu=None, peak_memory_gib=0.5, step_time_s=0.01, compile_s=1.0,
            data_wait_share=None, micro_batch_size=8, started=None, wall_s=None,
            trial_dir=f"/runs/s/trial-{number:04d}", reused_from=reused_from)

    base = record(0, 1000.0, {"mb": 1})
    records = [base, record(1, 1300.0, {"mb": 2}), record(2, 1200.0, {"mb": 4}),
               record(3, 1100.0, {"mb": 8}), record(4, 1050.0, {"mb": 16}),
               record(5, 1400.0, {"mb": 1}),                 # the baseline's configuration again
               record(6, 1300.0, {"mb": 2}, reused_from=1)]  # a reused copy of trial 1
    # Rule: top_k=3 is three configurations besides the baseline (README: "top 3 + the
    # baseline"); neither a copy nor another run of the baseline's configuration takes a place.
    assert [r.number for r in confirm_finalists(records, base, 3)] == [0, 1, 2, 3]


def test_a_paired_test_on_two_rounds_says_its_interval_is_too_wide_to_read():
    from autotune.commands.confirm import too_few_rounds

    def summary(rounds, low=-0.7, high=4.4):
        return {0: {"median": 1.0}, 7: {"median": 1.1, "vs_baseline": {
            "rounds": rounds, "low": low, "high": high}}}

    # Rule: a wide interval on 2 rounds (t = 12.7 at 1 degree of freedom) gets a note
    # naming the fix; 3 rounds, or 2 whose interval came out narrow, do not.
    note = too_few_rounds(summary(2))
    # It names the trial: beside other trials' 3 paired rounds, "a paired test here rests
    # on 2 round(s)" read as a contradiction.
    assert note.startswith("note: the paired test of trial #7 rests on 2 round(s)")
    assert "12.7 x the rounds' spread" in note and "confirm.repeats=5" in note
    assert too_few_rounds(summary(3)) is None and too_few_rounds({0: {"median": 1.0}}) is None
    assert too_few_rounds(summary(2, low=0.98, high=1.02)) is None


def test_the_top_two_are_tested_against_each_other_unless_one_is_the_baseline():
    from autotune.commands.confirm import render
    from autotune.study.records import TrialRecord
    from trials.contract.outcomes import Outcome

    def record(number, role=""):
        return TrialRecord(
            number=number, state="COMPLETE", params={"mb": number}, reason=Outcome.OK,
            detail="", launched=True, role=role, tokens_per_s=1000.0, mfu=None,
            peak_memory_gib=0.5, step_time_s=0.01, compile_s=1.0, data_wait_share=None,
            micro_batch_size=8, started=None, wall_s=None, trial_dir=f"/runs/trial-{number}",
            reused_from=None)

    base, a, b = record(0, "baseline"), record(1), record(2)
    runs = {0: [1000.0, 1010.0, 990.0], 1: [1500.0, 1490.0, 1510.0], 2: [1200.0, 1190.0, 1205.0]}

    def summary(medians):
        return {n: {"median": m, "min": m, "max": m, "cv": 0.0} for n, m in medians.items()}

    # Rule: trials 1 and 2 lead: tested against each other; 1 and the baseline lead: not.
    both = render([base, a, b], summary({0: 1000.0, 1: 1500.0, 2: 1200.0}), runs, base)
    assert "top two (trial 1 vs trial 2):" in both
    with_base = render([base, a], summary({0: 1000.0, 1: 1500.0}), runs, base)
    assert "top two" not in with_base


def test_a_stopped_confirm_resumes_and_a_second_confirm_measures_anew(harness, capsys):
    """SIGTERM mid-confirm keeps the finished runs; the same command runs only the rest; a
    confirm after a finished one is one of its own. The stop needs a process (scripted
    trials, real signals); the reruns run in virtual time."""
    import json
    import signal
    import subprocess
    import sys

    from autotune.study.schema.repeats import stored_repeats
    from tests.conftest import ROOT, project_env

    def confirm_runs() -> dict[str, list]:
        """The stored confirm runs by confirm id (``confirm/<id>/<trial>/<round>``)."""
        by_id: dict[str, list] = {}
        for repeats in stored_repeats(harness.study()).values():
            for r in repeats:
                if r.confirm:
                    by_id.setdefault(r.run.split("/")[1], []).append(r)
        return by_id

    space = harness.space("stop", {"runtime.threads": [2, 4]})
    # Every run its own step times (run_drift), counted across processes and this one.
    script = {"steps": 6, "run_drift": 0.001, "counter": str(harness.tmp / "runs-started")}
    harness.script(**script, step_sleep=0.005)
    code, _, err = harness.run(space, "sweep.n_trials=2", "sweep.neighbours=true")
    assert code == 0, err
    args = [*harness.overrides(space), "confirm.top_k=1", "confirm.repeats=2"]
    before = set(confirm_runs())
    env = project_env(AUTOTUNE_FAKE=json.dumps({**script, "step_sleep": 0.25}),
                      PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "confirm", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("confirm 3/4"):  # two runs stored, the third about to start
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, "".join(seen) + err
    assert err.strip().splitlines() == ["autotune: stopped by SIGTERM; the running "
                                        "re-measurement was killed; the finished ones are "
                                        "stored: run the same command again to run the rest"]
    (stopped,) = set(confirm_runs()) - before
    kept = confirm_runs()[stopped]
    # Rule: what finished before the stop is stored: round 1 of both finalists...
    assert len(kept) == 2 and {r.run.rsplit("/", 1)[1] for r in kept} == {"0"}
    code, rerun = _confirm(harness, capsys, space, "confirm.top_k=1", "confirm.repeats=2")
    assert code == 0, rerun
    assert "resuming the stopped confirm: 2 of 4 runs" in rerun
    assert "confirm 1/4" not in rerun and "confirm 3/4" in rerun
    # ... and the rerun runs only the rest: the same confirm, each run counted once.
    assert set(confirm_runs()) - before == {stopped}
    resumed = confirm_runs()[stopped]
    assert len(resumed) == 4 and len({r.run for r in resumed}) == 4
    assert {r.run.rsplit("/", 1)[1] for r in resumed} == {"0", "1"}
    # Rule: a confirm after a finished one is a confirm of its own (one round here), each
    # run stored once and each a measurement of its own: no step times read as another's.
    code, again = _confirm(harness, capsys, space, "confirm.top_k=1", "confirm.repeats=1")
    assert code == 0, again
    assert "resuming" not in again
    (second,) = set(confirm_runs()) - before - {stopped}
    fresh = confirm_runs()[second]
    assert len(fresh) == 2 and not {r.run for r in fresh} & {r.run for r in resumed}
    assert len({tuple(r.performance.step_times_s) for r in [*resumed, *fresh]}) == 6


def test_a_confirm_killed_with_9_leaves_no_run_beside_the_next_one(harness, capsys):
    """kill -9 of confirm leaves its running re-measurement alive (a session of its own);
    the next command on the study kills it before it measures anything."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT, project_env

    space = harness.space("k9", {"runtime.threads": [2, 4]})
    harness.script(steps=6, step_sleep=0.005)
    code, _, err = harness.run(space, "sweep.n_trials=2", "sweep.neighbours=true")
    assert code == 0, err
    args = [*harness.overrides(space), "confirm.top_k=1", "confirm.repeats=1"]
    env = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 400, "step_sleep": 0.25}))
    confirm = subprocess.Popen([sys.executable, "-m", "autotune", "confirm", *args], cwd=ROOT,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = harness.runs / "s" / "confirm"
    deadline = time.monotonic() + 60
    while not list(runs.glob("*/pid")) and time.monotonic() < deadline:
        time.sleep(0.1)
    (pid_file,) = runs.glob("*/pid")
    orphan = int(pid_file.read_text())
    confirm.send_signal(signal.SIGKILL)
    confirm.wait(timeout=30)
    os.kill(orphan, 0)  # Rule's premise: the re-measurement outlived its command
    code, out = _confirm(harness, capsys, space, "confirm.top_k=1", "confirm.repeats=1")
    assert code == 0, out
    # Rule: it is gone before the next command measured (reaped: not even a zombie left).
    try:
        state = open(f"/proc/{orphan}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    assert state in ("gone", "Z"), f"process {orphan} still runs"


def test_confirms_table_quotes_each_trials_sweep_figure_as_the_leaderboard_does():
    from autotune.commands.confirm import render
    from autotune.study.records import TrialRecord
    from autotune.study.schema.repeats import Repeat
    from trials.contract.outcomes import Outcome
    from trials.contract.performance import Performance

    base = TrialRecord(
        number=0, state="COMPLETE", params={"mb": 1}, reason=Outcome.OK, detail="",
        launched=True, role="baseline", tokens_per_s=1668.0, mfu=None, peak_memory_gib=0.5,
        step_time_s=0.01, compile_s=1.0, data_wait_share=None, micro_batch_size=8,
        started=None, wall_s=None, trial_dir="/runs/trial-0", reused_from=None,
        scorecard={"performance": Performance.from_dict({"tokens_per_s": 1668.0}).to_dict()},
        repeats=[Repeat(performance=Performance.from_dict({"tokens_per_s": 1911.0}),
                        source="baseline-check").to_json()])
    table = render([base], {0: {"median": 1583.0, "min": 1500.0, "max": 1600.0, "cv": 0.02}},
                   {0: [1583.0, 1500.0, 1600.0]}, base)
    # Rule: the "sweep" column is the trial's standing (its sweep runs pooled, 1,785), the
    # leaderboard's figure, not its first run (1,668), as a new user found it.
    row = table.splitlines()[1]
    assert round(base.standing) == 1785 and "1,785" in row and "1,668" not in row
