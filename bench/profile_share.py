"""What profiling the winner costs a sweep: the default sweep, as `make sweep` runs it.

Runs ``python -m autotune sweep`` with the embedded defaults (12 launches) in a
scratch runs directory and reads what the sweep stored about the profile of its
winner (``autotune.profile``): the profile's wall time, the time the study's
launched trials took (what the 10 % rule compares against), the sweep's own wall
time, and the shares.

    .venv/bin/python -m bench.profile_share
    .venv/bin/python -m bench.profile_share --n-trials 6
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autotune.profiling.profile import stored_profiles
from autotune.study.layout import study_url
from bench._common import REPO, child_env, cli, log, print_table, write_result

NAME = "profile_share"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-trials", type=int, default=12)
    args = parser.parse_args()
    import optuna

    runs = Path(tempfile.mkdtemp(prefix="autotune-bench-")) / "runs"
    argv = [sys.executable, "-m", "autotune", "sweep", f"sweep.runs_dir={runs}",
            f"sweep.n_trials={args.n_trials}", "sweep.progress=false"]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=child_env(), capture_output=True, text=True)
    sweep_wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    study = optuna.load_study(study_name="default",
                              storage=study_url(runs, "default"))
    profiles = stored_profiles(study)
    line = next((ln for ln in proc.stdout.splitlines() if "profiling the winner" in ln), "")
    log(line or "the winner was not profiled")
    if not profiles:
        raise SystemExit("no profile stored: " + line)
    (trial, p), = profiles.items()
    row = [args.n_trials, trial, f"{p.wall_s:.1f}", f"{p.sweep_s:.0f}",
           f"{100 * p.share_of_sweep:.1f} %", f"{sweep_wall:.0f}",
           f"{100 * p.wall_s / sweep_wall:.1f} %"]
    headers = ["launches", "winner", "profile wall s", "launched trials s",
               "share of trials' time", "sweep wall s", "share of sweep wall"]
    print_table(headers, [row])
    path = write_result(NAME, {"headers": headers, "rows": [row], "decision": line,
                               "shares": p.profile.shares})
    log(f"wrote {path}")


if __name__ == "__main__":
    cli(main)
