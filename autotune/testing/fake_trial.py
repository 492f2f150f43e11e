"""The scripted trial as a process: ``python -m autotune.testing.fake_trial --config X``.

Called exactly like the real trial program, it plays its script's plan
(:func:`autotune.testing.script.plan_run`) in real time: the same typed records through
the same writer (trials/contract/metrics.py), the same exit codes, a real hang, crash or
SIGKILL. It writes ``pid`` in its directory, ``probe.json`` when the script asks, and with
``"escape": true`` starts a child that leaves its group and drops its marker
(``escaped.pid``).
For what only a process shows (signals, process groups, reaping, placement); the rest of
the suite plays the same plan in virtual time (autotune/testing/virtual.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf

from autotune.testing.script import SIGKILLED, plan_run, read_script
from trials.contract.metrics import MetricsLog

#: How this program is started: the ``sweep.trial_command`` of a scripted study.
COMMAND = [sys.executable, "-m", "autotune.testing.fake_trial"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args, _ = parser.parse_known_args()
    cfg = OmegaConf.load(args.config)
    script = read_script()
    plan = plan_run(cfg, script, Path.cwd())
    log = MetricsLog(Path(cfg.run.metrics_path))
    # Written whole or not at all: a test polling for the file read it empty mid-write.
    (Path.cwd() / "pid.tmp").write_text(str(os.getpid()))
    (Path.cwd() / "pid.tmp").replace(Path.cwd() / "pid")
    if script.get("escape"):  # a child that leaves the group and drops the marker
        _escape(Path.cwd() / "escaped.pid")
    started, t = time.time(), 0.0
    for at, record in plan.events:
        time.sleep(max(0.0, at - t))
        t = at
        log.emit(record)
    if plan.exit_code is None:  # a hang: it never ends by itself
        time.sleep(3600)
    time.sleep(max(0.0, plan.exit_s - t))
    log.close()
    if script.get("probe"):  # where and when it ran (concurrent-trial tests)
        (Path.cwd() / "probe.json").write_text(json.dumps({
            "start": started, "end": time.time(), "affinity": sorted(os.sched_getaffinity(0)),
            "visible": {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES",
                                                   "ASCEND_RT_VISIBLE_DEVICES")
                        if k in os.environ}}))
    if plan.exit_code == SIGKILLED:
        os.kill(os.getpid(), signal.SIGKILL)
    if plan.stderr:
        print(plan.stderr, file=sys.stderr)
    sys.exit(plan.exit_code)


def _escape(pid_file: Path) -> None:
    """Start a child in a session of its own, with an environment of its own (no
    marker), that outlives this trial: what a careless data loader or a daemon does."""
    import subprocess

    code = ("import os, sys, time\n"
            "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
            "time.sleep(300)\n")
    subprocess.Popen([sys.executable, "-c", code, str(pid_file)], start_new_session=True,
                     env={"PATH": os.environ.get("PATH", "")}, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


if __name__ == "__main__":
    main()
