"""The follow loop's stop rules run on the monotonic clock: a step of the wall clock (NTP,
an administrator's ``date -s``) neither kills a healthy trial nor spares a hung one."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

FAST_STOPS = ("sweep.stop.compile_timeout_s=20", "sweep.stop.step_timeout_s=5",
              "sweep.stop.wall_timeout_s=60")
#: How far the wall clock jumps mid-trial: far past every stop rule above.
JUMP_S = 120.0


def test_a_wall_clock_step_mid_trial_does_not_kill_a_healthy_trial(harness, monkeypatch):
    harness.processes = True  # the real follow loop over a real process, in real time
    space = harness.space("two", {"data.prefetch": [16, 4]})
    harness.script(steps=8, step_sleep=0.3)
    real_time = time.time
    jumped_at: list[float] = []  # when the wall clock stepped (real seconds)

    def step_the_clock_mid_trial() -> None:
        """Step the wall clock 120 s forward as soon as the trial has written a step."""
        while not any("step" in p.read_text()
                      for p in harness.runs.glob("s/trial-*/metrics.jsonl")):
            if done.wait(0.05):
                return
        jumped_at.append(real_time())

    monkeypatch.setattr(time, "time", lambda: real_time() + (JUMP_S if jumped_at else 0.0))
    done = threading.Event()
    stepper = threading.Thread(target=step_the_clock_mid_trial, daemon=True)
    stepper.start()
    try:
        code, out, err = harness.run(space, "sweep.neighbours=true", "sweep.n_trials=1",
                                     *FAST_STOPS)
    finally:
        done.set()
        stepper.join()
    assert code == 0, out + err
    (trial,) = harness.study().trials
    # The clock stepped while the trial ran (its last record, stamped by its own clock,
    # came later) ...
    metrics = Path(trial.user_attrs["trial_dir"]) / "metrics.jsonl"
    last = json.loads(metrics.read_text().splitlines()[-1])
    assert jumped_at and jumped_at[0] < last["time"]
    # Rule: ... and the trial, healthy throughout, ends ok with every step: the 120 s jump
    # is no step progress lost and no wall-clock cap passed.
    assert trial.user_attrs["reason"] == "ok", trial.user_attrs.get("detail")
    assert len(trial.intermediate_values) > 0
