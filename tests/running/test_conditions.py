"""The host's conditions recorded with every run: the meter (a real CPU hog), the record,
the flags, and a sweep whose every trial keeps its conditions."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from autotune.report import leaderboard
from autotune.report.index import summarise
from autotune.running import conditions as meter_mod
from autotune.running.conditions import ConditionsMeter, cpu_mhz, host_cpu_s, process_cpu_s
from autotune.running.devices import Placement
from autotune.study import selection
from autotune.study.conditions import MEASURED_STEPS, WHOLE_RUN, Conditions, missed_precision
from autotune.study.records import CONDITIONS, IMPRECISE, load_records
from trials.contract.events import Phase, StepRecord, SummaryRecord
from trials.contract.launch import MARKER_ENV
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance

#: The real hog and meter here measure the host's load: a test beside them adds to it.
pytestmark = pytest.mark.solo

#: A busy loop pinned to one core that ends by itself after ``seconds``.
HOG = ("import os, sys, time\n"
       "os.sched_setaffinity(0, {int(sys.argv[2])})\n"
       "end = time.monotonic() + float(sys.argv[1])\n"
       "while time.monotonic() < end:\n"
       "    pass\n")
SLEEPER = "import sys, time; time.sleep(float(sys.argv[1]))"


@contextmanager
def hog_beside(seconds: float):
    """A hog pinned busy on the last core, not of any run (killed on the way out if it has
    not ended by itself)."""
    core = sorted(os.sched_getaffinity(0))[-1]
    proc = subprocess.Popen([sys.executable, "-c", HOG, str(seconds), str(core)])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=5)


@contextmanager
def hog_from(path: Path, seconds: float):
    """:func:`hog_beside` for ``seconds`` from when ``path`` appears (a trial's directory:
    the hog then meets that trial and none before it)."""
    stop = threading.Event()
    hog: list[subprocess.Popen] = []

    def start_when_there() -> None:
        while not stop.is_set() and not path.exists():
            time.sleep(0.01)
        if not stop.is_set():
            core = sorted(os.sched_getaffinity(0))[-1]
            hog.append(subprocess.Popen([sys.executable, "-c", HOG, str(seconds), str(core)]))

    watcher = threading.Thread(target=start_when_there, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(timeout=5)
        for proc in hog:
            proc.kill()
            proc.wait(timeout=5)


def start_child(code: str, seconds: float, *, marker: str, core: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, str(seconds), str(core)],
                            env={**os.environ, MARKER_ENV: marker})


def test_a_cpu_hog_is_the_runs_own_load_or_other_load_by_its_marker():
    """Two meters over the same window see the same hogs (one pinned busy on each of up to
    two cores, started inside the window, ending by themselves within it): one meter's run
    is the hogs, the other's run is a sleeping process beside them. Same window, same
    background: only the attribution differs, and the difference must be the CPU time
    the kernel charged the hogs (their rusage when reaped), however busy the machine is
    (with 5 other runnable jobs on 2 cores the hogs got 0.2-0.7 cores between them)."""
    hogs, sleeper = f"test/{uuid.uuid4().hex}", f"test/{uuid.uuid4().hex}"
    cores = sorted(os.sched_getaffinity(0))[:2]
    napper = start_child(SLEEPER, 4.0, marker=sleeper, core=cores[0])
    try:
        time.sleep(0.3)  # started: its environment carries the marker after exec
        own = ConditionsMeter(hogs, sample_s=0.02)
        beside = ConditionsMeter(sleeper, sample_s=0.02)
        busy = [start_child(HOG, 1.5, marker=hogs, core=core) for core in cores]
        end = time.monotonic() + 2.0  # the hogs end (as zombies, not yet reaped) inside it
        while time.monotonic() < end:
            own.sample()
            beside.sample()
            time.sleep(0.01)
        as_run, as_other = own.finish(), beside.finish()
        hog_cpu_s = 0.0
        for proc in busy:  # reaped only now: the kernel's own account of their CPU time
            _, _, usage = os.wait4(proc.pid, 0)
            proc.returncode = 0
            hog_cpu_s += usage.ru_utime + usage.ru_stime
    finally:
        napper.kill()
        napper.wait(timeout=5)
    hog_cores = hog_cpu_s / as_run.window_s
    seen = as_other.other_cores - as_run.other_cores
    # Rule: processes carrying the run's marker are its own, not other load; busy processes
    # without it are other load: the hogs' cores show up only beside the sleeping run, as
    # much CPU as the kernel charged them (jiffies and the last sample's lag: +-0.15).
    assert hog_cores > 0.1, hog_cores
    assert abs(seen - hog_cores) <= 0.15 + 0.1 * hog_cores, (seen, hog_cores)


def test_a_run_with_no_process_on_this_host_has_no_load_figure():
    meter = ConditionsMeter(f"test/{uuid.uuid4().hex}", Placement(devices=(0,), cores=(0,)))
    conditions = meter.finish()
    # Rule: no process of the run here (a SLURM job elsewhere): the host's load is not its.
    assert conditions.other_cores is None
    # Rule: the placement is recorded as the run's devices and cores.
    assert conditions.placement == "devices 0 cores 0"


def test_host_and_process_cpu_times_are_read_from_proc():
    busy, steal, total = host_cpu_s()
    # Rule: busy time is part of the total; steal is reported by this (any modern) kernel.
    assert 0 < busy <= total and steal is not None and 0 <= steal <= total
    cpu_s, started_s = process_cpu_s(os.getpid())
    # Rule: a live process's CPU seconds and start time (since boot) are read; a gone one
    # reads as None.
    assert cpu_s >= 0 and 0 < started_s <= time.clock_gettime(time.CLOCK_BOOTTIME)
    assert process_cpu_s(2 ** 22 + 1) is None


def test_cpu_clock_is_read_where_the_kernel_exposes_it(tmp_path, monkeypatch):
    freq = tmp_path / "cpu1" / "cpufreq"
    freq.mkdir(parents=True)
    (freq / "scaling_cur_freq").write_text("2400000\n")
    monkeypatch.setattr(meter_mod, "CPUFREQ", tmp_path)
    # Rule: kHz from scaling_cur_freq, in MHz; a core without cpufreq is skipped.
    assert cpu_mhz((0, 1)) == [2400.0]


def step(n: int, phase: Phase) -> StepRecord:
    return StepRecord(step=n, phase=phase, loss=1.0, grad_norm=1.0, step_s=0.01,
                      data_wait_s=0.0, tokens=8, peak_rss_gib=0.1)


def test_the_window_is_the_measured_steps_and_the_summary_closes_it(monkeypatch):
    monkeypatch.setattr(meter_mod, "MIN_WINDOW_S", 0.0)
    meter = ConditionsMeter("m", find=lambda marker: [os.getpid()], sample_s=0.0)
    for record in (step(0, Phase.COMPILE), step(1, Phase.WARMUP)):
        meter.record(record)
    opened = meter.window.t
    meter.record(step(2, Phase.MEASURE))
    meter.record(step(3, Phase.WARMUP))  # a late warm-up step does not re-open it
    meter.record(SummaryRecord())
    closed = meter.finish()
    meter.record(step(4, Phase.MEASURE))
    # Rule: the window opens at the last warm-up step read and closes at the summary; what
    # comes after changes nothing.
    assert closed.window == MEASURED_STEPS and meter.window.t == opened
    assert meter.finish() is closed


def test_a_run_without_measured_steps_is_measured_whole():
    meter = ConditionsMeter("m", find=lambda marker: [os.getpid()])
    meter.record(step(0, Phase.COMPILE))
    # Rule: no measured step (a crash in compile): the whole run is the window.
    assert meter.finish().window == WHOLE_RUN


def test_contention_is_judged_over_a_long_enough_window():
    busy = Conditions(other_cores=1.3, window_s=4.0)
    # Rule: above sweep.contention_cores over >= 1 s is contended; at or below is not; a
    # window too short to tell, or no figure, is never flagged.
    assert busy.judge(0.5).contended and busy.judge(0.5).contention_cores == 0.5
    assert not busy.judge(1.3).contended
    assert not Conditions(other_cores=1.3, window_s=0.2).judge(0.5).contended
    assert not Conditions(other_cores=None, window_s=4.0).judge(0.5).contended
    # Rule: the record survives its JSON form.
    judged = busy.judge(0.5)
    assert Conditions.from_dict(judged.to_dict()) == judged


def test_a_run_that_missed_its_precision_target_says_by_how_much():
    wide = Performance(tokens_per_s=100.0, interval_half_width=0.171)
    # Rule: wider than run.target_interval is missed, and the text says both widths.
    assert missed_precision(wide, 0.02) == "interval +-17.1 % > target +-2 %"
    assert missed_precision(Performance(tokens_per_s=100.0, interval_half_width=0.01),
                            0.02) is None
    assert missed_precision(Performance(), 0.02) is None


@pytest.fixture
def hogged_sweep(harness):
    """A two-trial sweep of the scripted fake trial (~2 s of measured steps each) while a
    hog pinned to one core runs beside it; the hog ends by itself within 20 s."""
    harness.processes = True  # the host's load is measured over a real run's wall time
    space = harness.space("cond", {"train.micro_batches": [1, 2]})
    harness.script(steps=12, step_sleep=0.2)
    with hog_beside(20.0):
        code, out, err = harness.run(space, "train.micro_batches=1", "sweep.n_trials=2",
                                     "sweep.neighbours=true", "sweep.contention_cores=0.25",
                                     "sweep.stop.slow_ratio=0",
                                     "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, out + err
    return harness, out


def test_every_trial_of_a_sweep_keeps_its_conditions_and_load_is_flagged(hogged_sweep):
    harness, out = hogged_sweep
    records = [r for r in load_records(harness.study()) if r.launched]
    assert len(records) == 2
    for r in records:
        c = r.conditions
        # Rule: every launched trial stores the host's conditions over its measured steps,
        # judged against sweep.contention_cores.
        assert c is not None and c.window == MEASURED_STEPS and c.window_s >= 1.0
        assert c.contention_cores == 0.25 and c.other_cores is not None
        # Rule: a hog on a core beside the run is load above 0.25 cores: flagged.
        assert r.contended and r.flags == [f"load {c.other_cores:.1f}"]
    # Rule: the progress line and the sweep's leaderboard mark the loaded runs.
    assert "!load" in out
    assert leaderboard.FLAGS_COLUMN in out and "flags: load N" in out


def record_with(records, number, **attrs):
    r = next(r for r in records if r.number == number)
    r.attrs.update(attrs)
    return r


def test_flagged_runs_show_in_the_leaderboard_and_the_report_lines(harness):
    space = harness.space("flags", {"train.micro_batches": [1, 2]})
    harness.script()
    code, out, err = harness.run(space, "train.micro_batches=1", "sweep.n_trials=2",
                                 "sweep.neighbours=true")
    assert code == 0, out + err
    from autotune.cli import main

    code = main(["confirm", *harness.overrides(space), "confirm.top_k=1", "confirm.repeats=1",
                 "sweep.contention_cores=0.75"])
    assert code == 0, harness.capsys.readouterr().out
    records = load_records(harness.study())
    # Rule: every launched trial keeps its conditions (a scripted run's steps are read
    # within a second: measured over the whole run, never judged contended), and so does
    # every repeat (confirm's runs, judged against sweep.contention_cores).
    assert all(r.conditions is not None for r in records if r.launched)
    repeats = [c for r in records for c in r.repeat_conditions]
    assert repeats and all(c is not None and c.contention_cores == 0.75 for c in repeats)
    plain = leaderboard.render(records)
    loaded = Conditions(other_cores=1.34, window_s=5.0).judge(0.5).to_dict()
    base = selection.baseline(records)
    record_with(records, base.number, **{IMPRECISE: "interval +-17.1 % > target +-2 %"})
    other = next(r for r in records if r.launched and r.number != base.number)
    record_with(records, other.number, **{CONDITIONS: loaded})
    flagged = leaderboard.frame(records).set_index("trial")[leaderboard.FLAGS_COLUMN]
    # Rule: no flags column while nothing is flagged; then the loaded run shows its load,
    # the baseline that missed its target shows "imprecise".
    assert leaderboard.FLAGS_COLUMN not in plain
    assert flagged[other.number] == "load 1.3" and flagged[base.number] == "imprecise"
    assert leaderboard.FLAGS_NOTE in leaderboard.render(records)
    confirmed = next(r for r in records if r.repeats)
    confirmed.repeats[0] = {**confirmed.repeats[0], CONDITIONS: loaded}
    summary = summarise(records, study="s", storage="x", n_objectives=1, budget_gib=8.0,
                        verdict=selection.verdict(records, prior_cv=0.05))
    lines = "\n".join(summary.lines())
    # Rule: the report says which trials were measured under load and that the baseline
    # missed its precision target.
    assert (f"measured under load (other processes above 0.5 cores): #{other.number} "
            f"(1.3 cores), #{confirmed.number} confirm run 1 (1.3 cores)") in lines
    assert f"baseline #{base.number} missed its precision target: interval +-17.1 %" in lines
    # Rule: a repeat is numbered within its own source: the second confirm run after two
    # baseline re-measurements is "confirm run 2", not "run 4".
    quiet = Conditions(other_cores=0.0, window_s=5.0).judge(0.5).to_dict()
    confirmed.repeats[:] = [{"source": "baseline-check", CONDITIONS: quiet},
                            {"source": "baseline-check", CONDITIONS: quiet},
                            {"source": "confirm", CONDITIONS: quiet},
                            {"source": "confirm", CONDITIONS: loaded}]
    assert f"#{confirmed.number} confirm run 2 (1.3 cores)" in "\n".join(
        leaderboard.flagged_lines(records))


def test_a_trial_stopped_as_slow_under_load_is_re_queued_once_for_a_quiet_host(harness):
    """The configuration threads=1 runs at a third of the baseline's speed (threads=3):
    slow, but by less than a one-core load can take. Its first run meets a hog beside it:
    stopped as slow under load, it is re-queued (not counted), and runs again once the
    host is quiet (or after sweep.quiet_wait_s); slow again, it is then told slow."""
    harness.processes = True  # the host's load is measured over a real run's wall time
    space = harness.space("cont", {"runtime.threads": [3, 1]})
    harness.script([], steps=8, step_sleep=0.3)
    # The baseline runs on a quiet host; the hog comes with trial 1 (a load that passes:
    # a baseline measured under the same load would make the verdict a fair one).
    with hog_from(harness.runs / "s" / "trial-0001", 12.0):
        code, out, err = harness.run(space, "runtime.threads=3", "sweep.n_trials=2",
                                     "sweep.neighbours=true", "sweep.contention_cores=0.25",
                                     "sweep.quiet_wait_s=20")
    assert code == 0, out + err
    study = harness.study()
    runs = [(t.user_attrs.get("reason"), t.user_attrs.get("role"))
            for t in study.trials if t.params == {"runtime.threads": 1}]
    # Rule: stopped as slow under load, once: re-queued (a retry), then told what it is.
    assert [reason for reason, _ in runs] == ["contended", "slow"], runs
    assert runs[1][1] == "retry"
    contended = next(t for t in study.trials if t.user_attrs.get("reason") == "contended")
    assert "re-queued once" in contended.user_attrs["detail"]
    assert "other processes" in contended.user_attrs["detail"]
    # Rule: the contended run does not count against n_trials (2 launches still ran).
    counted = [t for t in study.trials if t.user_attrs.get("launched")
               and t.user_attrs.get("reason") != "contended"]
    assert len(counted) == 2
    first, retried = (t for t in study.trials if t.params == {"runtime.threads": 1})
    # The retry is announced under its own number, naming the trial that was stopped.
    assert (f"trial {retried.number}: re-runs trial {first.number}'s configuration, stopped "
            "under load; waiting up to 20 s for the host to be quiet") in out
    # ...and the report counts as the sweep did: 3 launched, 2 of them against the budget.
    from autotune.cli import main

    assert main(["report", *harness.overrides(space)]) == 0
    index = (harness.runs / "s" / "report" / "index.md").read_text()
    assert ("3 launched, 2 of them against sweep.n_trials; the others were stopped under "
            "load, interrupted or orphaned, and re-queued") in index


class ScriptedLoad:
    """The host's load (other processes' cores) of each run the sweep follows, in launch
    order, in place of the meter (virtual trials have no process to measure)."""

    def __init__(self, loads: list[float]) -> None:
        self.loads = list(loads)

    def __call__(self, marker, placement=None, **_):
        cores = self.loads.pop(0) if self.loads else 0.0
        return ScriptedMeter(Conditions(other_cores=cores, window=MEASURED_STEPS,
                                        window_s=10.0, recent_cores=cores))


class ScriptedMeter:
    def __init__(self, conditions: Conditions) -> None:
        self.conditions = conditions

    def record(self, record) -> None:
        pass

    def sample(self, *, force: bool = False) -> None:
        pass

    def close(self) -> Conditions:
        return self.conditions

    finish = close


@pytest.mark.parametrize("baseline_load, far, told", [
    # threads=1 runs at a third of the baseline's speed (threads=3): slow (under 0.5 x the
    # best), but a load of one core can have halved it: the load may be what made it slow.
    (1.0, False, ["slow"]),               # both sides loaded: a fair verdict, not re-run
    (0.0, False, ["contended", "slow"]),  # a quiet baseline: wait for quiet, re-run once
    # Scripted 10x slower still: slow even against the best at half its speed.
    (0.0, True, ["slow"]),
])
def test_a_slow_verdict_under_load_stands_when_the_load_cannot_explain_it(
        harness, monkeypatch, baseline_load, far, told):
    """A trial is stopped as slow while the host is loaded (one core of other processes).
    When the slow rule judged it against the baseline's latest run and that run was loaded
    too, the comparison was like with like and the verdict stands (a host loaded from the
    start, as under a hog that never stops, would otherwise make every slow trial wait for
    a quiet host that does not come and run twice). When it would be slow even against the
    best slowed by the most that load can take (half, on the core of its slowest thread),
    the load cannot have made it slow: the verdict stands. Else the load may be what made
    it slow: re-queued once."""
    from autotune import proposal
    from autotune.running import monitor

    monkeypatch.setattr(monitor, "ConditionsMeter", ScriptedLoad([baseline_load, 1.0, 0.0]))
    monkeypatch.setattr(proposal, "wait_for_quiet", lambda *a, **k: 0.0)
    space = harness.space("pair", {"runtime.threads": [3, 1]})
    harness.script([{"when": {"runtime.threads": 1}, "do": "slow"}] if far else [], steps=8)
    code, out, err = harness.run(space, "runtime.threads=3", "sweep.n_trials=2",
                                 "sweep.neighbours=true", "sweep.contention_cores=0.25")
    assert code == 0, out + err
    study = harness.study()
    assert [t.user_attrs.get("reason") for t in study.trials
            if t.params == {"runtime.threads": 1}] == told
    paired = "judged against the baseline's latest run (trial 0), measured under load too"
    assert (paired in out) == (baseline_load > 0 and not far), out
    beyond = "slow even against the best slowed to 0.50 of its speed, the most that load can take"
    assert (beyond in out) == far, out


def test_a_load_leaves_a_run_at_least_a_fair_share_of_its_slowest_core():
    # Rule: one busy core of other processes on the core of the run's slowest thread
    # leaves it half; two, a third; the larger of the window's and its last seconds' load.
    assert Conditions(other_cores=1.0, window_s=10.0).speed_left() == pytest.approx(0.5)
    assert Conditions(other_cores=0.5, window_s=10.0,
                      recent_cores=2.0).speed_left() == pytest.approx(1 / 3)
    # Rule: a load no one measured bounds nothing.
    assert Conditions().speed_left() is None


def test_the_slow_rules_reference_carried_load_only_when_its_figure_did():
    import datetime as dt
    from types import SimpleNamespace

    from autotune.proposal import reference_loaded

    def record(number, runs, *, contended=False):
        """runs: (seconds, under load) of each sweep run, its own first."""
        return SimpleNamespace(
            number=number, contended=contended,
            finished=dt.datetime.fromtimestamp(runs[0][0], dt.timezone.utc),
            timed_runs=lambda: [(t, None) for t, _ in runs],
            sweep_run_loads=lambda: [loaded for _, loaded in runs])

    loaded_base = record(0, [(100.0, True)])
    # Rule: the best is the baseline, its latest run loaded: like with like.
    assert reference_loaded(loaded_base, loaded_base)
    # Rule: a best measured quiet after the baseline's loaded run is the figure the rule
    # used, unscaled: not like with like (the trial may be re-run on a quiet host).
    quiet_best = record(3, [(200.0, False)])
    assert not reference_loaded(loaded_base, quiet_best)
    # ...unless a baseline run measured after it re-scaled it (drift_factor), under load.
    rescaled = record(0, [(100.0, False), (300.0, True)])
    assert reference_loaded(rescaled, quiet_best)
    # ...or the best itself was measured under load.
    assert reference_loaded(loaded_base, record(3, [(200.0, True)], contended=True))
    # Rule: a baseline whose latest run was quiet never makes the reference a loaded one.
    assert not reference_loaded(record(0, [(100.0, True), (300.0, False)]), quiet_best)


def test_a_load_that_came_late_in_a_run_is_seen_in_its_last_seconds():
    """A 10 s run, quiet for 8 s, then other processes take 2 cores: diluted over the whole
    run that is 0.4 cores (under the 0.5 threshold), over its last 3 s about 1.3."""
    meter = ConditionsMeter("m", find=lambda marker: [], sample_s=0.0)
    # (when, host busy CPU s, the run's CPU s, the orchestrator's CPU s), every second;
    # the run itself keeps one core busy throughout.
    meter.snapshots.clear()
    meter.snapshots.extend((t, 1.0 * t + 2.0 * max(0, t - 8), 1.0 * t, 0.0)
                           for t in range(11))
    recent = meter.recent_cores()
    assert recent == pytest.approx(4.0 / 3.0)
    whole = Conditions(other_cores=0.4, window=MEASURED_STEPS, window_s=10.0,
                       recent_cores=recent)
    # Rule: the run's window is not contended, but a trial stopped at its end is judged by
    # its last seconds (the steps a slow rule stopped it on): loaded.
    assert not whole.judge(0.5).contended
    assert whole.loaded_at_the_end(0.5)
    assert not Conditions(other_cores=0.4, window_s=10.0, recent_cores=0.2).loaded_at_the_end(0.5)
    # Rule: samples spanning under a second tell nothing.
    meter.snapshots.clear()
    meter.snapshots.extend([(0.0, 0.0, 0.0, 0.0), (0.5, 1.0, 0.0, 0.0)])
    assert meter.recent_cores() is None


def test_a_verdict_a_loaded_host_can_cause_is_not_one_on_the_configuration():
    loaded = Conditions(other_cores=1.2, window=MEASURED_STEPS, window_s=10.0)
    quiet = Conditions(other_cores=0.1, window=MEASURED_STEPS, window_s=10.0)
    # Rule: stopped as slow, or by a clock (no step in time, past the wall cap), while the
    # host was loaded: the load may explain it (the sweep re-queues it as contended).
    for reason in (Outcome.SLOW, Outcome.HANG, Outcome.TIMEOUT):
        assert loaded.may_explain(reason, 0.5), reason
        assert not quiet.may_explain(reason, 0.5), reason
    # Rule: what a load cannot cause stays the configuration's, loaded or not.
    for reason in (Outcome.OK, Outcome.OOM, Outcome.DIVERGED, Outcome.CRASH,
                   Outcome.UNSUPPORTED):
        assert not loaded.may_explain(reason, 0.5), reason


def test_a_load_that_stays_is_told_from_one_that_passes():
    from autotune.study.conditions import stays_loaded

    # Rule: one or two loaded runs among quiet ones are a load that passes (wait, re-run).
    assert not stays_loaded([False, False, False, True])
    assert not stays_loaded([False, True, False, True])
    # Rule: three of the last four loaded, the newest among them: the host stays loaded
    # (judge against the baseline measured under the same load; do not wait and re-run).
    assert stays_loaded([False, True, True, True])
    assert stays_loaded([True, True, False, True])
    # Rule: the newest run quiet means the load has passed, whatever came before.
    assert not stays_loaded([True, True, True, False])
    # Too few runs to tell a load that stays.
    assert not stays_loaded([True, True])
