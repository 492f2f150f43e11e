"""sweep.parallel_trials: K trials in flight on disjoint devices, exact budgets, no duplicates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from optuna.trial import TrialState

from autotune.running.devices import DevicePool
from tests.conftest import project_env

#: The fake trial writes what it was given: its devices, its CPU affinity, when it ran.
PROBE = "import os,json,time,sys"


def test_device_pool_hands_out_disjoint_sets_and_takes_them_back():
    pool = DevicePool("GPU", 8, cores=list(range(16)))
    a = pool.take(4)
    b = pool.take(2)
    c = pool.take(2)
    assert a.devices == (0, 1, 2, 3) and b.devices == (4, 5) and c.devices == (6, 7)
    assert a.env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"} and not a.cores
    assert pool.take(1) is None
    pool.give(b)
    assert pool.take(4) is None and pool.take(2).devices == (4, 5)
    npu = DevicePool("Ascend", 8, cores=[0]).take(3)
    assert npu.env == {"ASCEND_RT_VISIBLE_DEVICES": "0,1,2"}


def test_cpu_devices_are_disjoint_core_sets():
    pool = DevicePool("CPU", 2, cores=[0, 1, 2, 3])
    first, second = pool.take(1), pool.take(1)
    assert first.cores == (0, 1) and second.cores == (2, 3)
    assert first.argv_prefix() == ["taskset", "-c", "0,1"] and not first.env
    shared = DevicePool("CPU", 4, cores=[0, 1])
    assert shared.cores_shared and shared.take(1).cores == (0,)


def _read_runs(harness, study="s"):
    runs = []
    for trial_dir in sorted((harness.runs / study).glob("trial-*")):
        probe = trial_dir / "probe.json"
        if probe.exists():
            runs.append(json.loads(probe.read_text()))
    return runs


def test_parallel_trials_run_side_by_side_on_their_own_cores(harness):
    """Two CPU trials at once on the 2-device CPU profile: each pinned to one core, their
    run times overlap, the budget is exact and the log warns about shared numbers."""
    harness.processes = True  # each process's own CPU affinity and run time (probe.json)
    space = harness.space("par", {"train.micro_batches": [1, 2, 4, 8], "runtime.threads": [2, 1]})
    harness.script(steps=8, step_sleep=0.25, probe=True)
    code, out, err = harness.run(space, "sweep.parallel_trials=2", "sweep.n_trials=5",
                                 "sweep.sampler=random", "sweep.stop.slow_ratio=0",
                                 "sweep.stop.slow_warmup_ratio=0")
    assert code == 0, err
    study = harness.study()
    launched = [t for t in study.trials if t.user_attrs.get("launched")]
    assert len(launched) == 5
    keys = [json.dumps(t.params, sort_keys=True) for t in launched]
    assert len(set(keys)) == len(keys), "a configuration was launched twice"
    runs = _read_runs(harness)
    assert len(runs) == 5
    assert all(len(r["affinity"]) == 1 for r in runs)
    # The baseline ran alone; afterwards two trials overlapped, on different cores.
    baseline = min(runs, key=lambda r: r["start"])
    rest = [r for r in runs if r is not baseline]
    assert all(r["start"] >= baseline["end"] - 0.05 for r in rest)
    overlapping = [(a, b) for i, a in enumerate(rest) for b in rest[i + 1:]
                   if a["start"] < b["end"] and b["start"] < a["end"]]
    assert overlapping and all(a["affinity"] != b["affinity"] for a, b in overlapping)
    # Rule: the side-by-side warning is said once (on the console, not also as a log line).
    assert (out + err).count("disturb each other") == 1, out + err
    placements = [t.user_attrs.get("placement") for t in launched[1:]]
    assert all(p and p.startswith("devices ") for p in placements)


def test_more_concurrent_trials_than_devices_is_refused(harness):
    space = harness.space("par", {"train.micro_batches": [1, 2]})
    code, _, err = harness.run(space, "sweep.parallel_trials=3")
    assert code == 2
    assert "sweep.parallel_trials=3" in err and "has 2" in err
    assert "Traceback" not in err
    assert not (harness.runs / "s").exists()


def test_sigterm_stops_every_concurrent_trial_and_a_rerun_finishes_the_budget(harness):
    space = harness.space("par", {"train.micro_batches": [1, 2, 4, 8], "runtime.threads": [2, 1]})
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, "sweep.parallel_trials=2", "sweep.n_trials=4",
                               "sweep.sampler=random", "sweep.stop.slow_ratio=0",
                               "sweep.stop.slow_warmup_ratio=0")]
    slow = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 40, "step_sleep": 0.25,
                                                 "probe": True}))
    orchestrator = subprocess.Popen(argv, env=slow, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 90
    while time.time() < deadline and len(list((harness.runs / "s").glob("trial-*/pid"))) < 3:
        time.sleep(0.2)
    pids = [int(p.read_text()) for p in (harness.runs / "s").glob("trial-*/pid")]
    assert len(pids) >= 3, "two trials never ran side by side after the baseline"
    os.kill(orchestrator.pid, signal.SIGTERM)
    _, err = orchestrator.communicate(timeout=60)
    assert orchestrator.returncode == 143, err
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    study = harness.study()
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]
    interrupted = [t for t in study.trials if t.user_attrs.get("reason") == "interrupted"]
    assert len(interrupted) >= 2
    fast = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 6, "step_sleep": 0.01}))
    resumed = subprocess.run(argv, env=fast, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    after = harness.study()
    launched = [t for t in after.trials if t.user_attrs.get("launched")
                and t.user_attrs.get("reason") not in ("interrupted", "orphaned")]
    assert len(launched) == 4
    assert not [t for t in after.trials if t.state is TrialState.RUNNING]


def _postgres(name: str) -> str:
    import psycopg2

    con = psycopg2.connect(host="127.0.0.1", user="postgres", dbname="postgres")
    con.autocommit = True
    con.cursor().execute(f"drop database if exists {name} with (force)")
    con.cursor().execute(f"create database {name}")
    con.close()
    return f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"


def test_four_postgresql_workers_spend_the_budget_exactly_with_no_duplicate(harness):
    """4 orchestrators on one PostgreSQL study, 4 times: launches == n_trials, and no
    configuration is launched twice (one running elsewhere is waited for and reused)."""
    space = harness.space("shared", {"train.micro_batches": [1, 2, 4],
                                     "runtime.threads": [2, 1]})
    env = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 4, "step_sleep": 0.05}))
    for rep in range(4):
        url = _postgres(f"autotune_claims_{rep}")
        argv = [sys.executable, "-m", "autotune", "sweep",
                *harness.overrides(space, f"sweep.storage={url}", "sweep.n_trials=4",
                                   f"sweep.study=rep{rep}", f"sweep.seed={rep}",
                                   "sweep.sampler=random", "sweep.stop.slow_ratio=0",
                                   "sweep.stop.slow_warmup_ratio=0")]
        workers = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for _ in range(4)]
        outputs = [w.communicate(timeout=300) for w in workers]
        assert [w.returncode for w in workers] == [0] * 4, outputs
        import optuna

        trials = optuna.load_study(study_name=f"rep{rep}", storage=url).trials
        launched = [t for t in trials if t.user_attrs.get("launched")]
        assert len(launched) == 4, f"repetition {rep}: {len(launched)} launches"
        keys = [json.dumps(t.params, sort_keys=True) for t in launched]
        assert len(set(keys)) == len(keys), f"repetition {rep}: a duplicate launch"
        assert all(t.state.is_finished() for t in trials), [
            (t.number, t.state.name, t.user_attrs.get("reason"), t.user_attrs.get("role"))
            for t in trials if not t.state.is_finished()]


def test_two_postgresql_workers_race_the_finalists_once(harness):
    """Both workers on one study reach the end of its budget together: one races the
    finalists, the other waits for that race and reports its outcome, and no final run is
    made twice (each ran its own race before: the same runs twice, the pick the same)."""
    import optuna

    # prefetch changes nothing in the fake: the baseline and its prefetch neighbour tie.
    space = harness.space("final", {"data.prefetch": [16, 32], "runtime.threads": [2, 1]})
    env = project_env(AUTOTUNE_FAKE=json.dumps({"steps": 4, "step_sleep": 0.3}))
    url = _postgres("autotune_final_race")
    argv = [sys.executable, "-m", "autotune", "sweep",
            *harness.overrides(space, f"sweep.storage={url}", "sweep.n_trials=3",
                               "sweep.study=final", "sweep.neighbours=true")]
    workers = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    outputs = [w.communicate(timeout=300) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    repeats = optuna.load_study(study_name="final", storage=url).user_attrs["autotune.repeats"]
    final_runs = [r["run"] for runs in repeats.values() for r in runs
                  if str(r.get("run", "")).startswith("final/")]
    # Rule: one final race for the study: each of its runs made once, by one worker.
    assert final_runs and len(final_runs) == len(set(final_runs)), final_runs
    assert sum("within noise of the best" in out for out, _ in outputs) == 1, outputs


class _Script:
    """Dispatcher callbacks over a scripted line of proposals (no Optuna, no processes)."""

    def __init__(self, sizes: list[int], budget: int) -> None:
        import threading as _threading

        from autotune.running.dispatch import Ready

        self.line = [Ready(trial=n, params={"n": n}, cfg=None, label=str(n), devices=d)
                     for n, d in enumerate(sizes)]
        self.budget = budget
        self.claimed = 0
        self.ran: list[tuple[int, tuple]] = []
        self.released: list[int] = []
        self.lock = _threading.Lock()
        self.events = {}

    def prepare(self):
        from autotune.running.dispatch import Settled

        if not self.line:
            return Settled(launched=False)
        self.claimed += 1
        return self.line.pop(0)

    def run(self, ready, placement):
        from autotune.running.dispatch import Settled

        if ready.twin is not None:
            while ready.twin not in [n for n, _ in self.ran]:
                time.sleep(0.01)
            return Settled(launched=False)
        time.sleep(0.05 * ready.devices)
        with self.lock:
            self.ran.append((ready.trial, placement.devices))
        return Settled(launched=True)

    def verdict(self, idle):
        from autotune.study.sweep_end import DONE

        return DONE if self.claimed >= self.budget or idle > 3 else None


def _dispatch(script, pool, slots):
    import threading as _threading

    from autotune.running.dispatch import Dispatcher

    return Dispatcher(pool, slots, prepare=script.prepare, run=script.run,
                      verdict=script.verdict, release=lambda r: script.released.append(r.trial),
                      stopping=_threading.Event()).loop()


def test_proposals_in_line_when_the_budget_is_claimed_still_run():
    script = _Script([1, 8, 1, 1, 4, 2], budget=6)
    assert _dispatch(script, DevicePool("GPU", 8, cores=[0]), 8).message == "done"
    assert sorted(n for n, _ in script.ran) == [0, 1, 2, 3, 4, 5] and not script.released


def test_small_trials_overtake_a_large_one_only_a_bounded_number_of_times():
    """An 8-device proposal behind a running 4-device one: 1-device proposals behind it
    backfill the free devices, but at most MAX_PASSED of them start before it does."""
    from autotune.running.dispatch import MAX_PASSED

    script = _Script([4, 8] + [1] * 10, budget=12)
    _dispatch(script, DevicePool("GPU", 8, cores=[0]), 8)
    order = [n for n, _ in script.ran]
    assert len(order) == 12
    started_before_large = [n for n in order[:order.index(1)] if n >= 2]
    assert 1 <= len(started_before_large) <= MAX_PASSED


def test_a_proposal_waiting_for_its_twin_in_line_does_not_deadlock():
    from autotune.running.dispatch import Ready

    script = _Script([8, 4], budget=3)
    twin = Ready(trial=99, params={"n": 1}, cfg=None, label="twin", devices=0, twin=1)
    script.line.insert(2, twin)
    start = time.time()
    assert _dispatch(script, DevicePool("GPU", 8, cores=[0]), 8).message == "done"
    assert time.time() - start < 10 and sorted(n for n, _ in script.ran) == [0, 1]
