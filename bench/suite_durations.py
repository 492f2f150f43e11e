"""How long the test suite takes, revision beside revision (issue 31: a suite that runs in
minutes).

    .venv/bin/python -m bench.suite_durations --rev d364c79 --rev HEAD

Each revision is checked out as a detached git worktree in a temporary directory and its
whole suite runs there through its own `make test` (whatever that revision's Makefile runs:
one pytest, or two workers side by side and then the solo tests), with this checkout's
virtual environment, the worktree first on ``PYTHONPATH`` and ``--durations=0``: a fresh
checkout, so a cold compile cache, as on CI's clean clone. The revisions run one
after the other (a suite uses both cores; two at once would time each other's load), in
the order given; the foreign load over each run is recorded beside its time.

Prints, per revision: wall time, passed/failed/skipped, the seconds in tests marked
``slow`` (real MindSpore) and the rest, and the 20 slowest test phases. Results:
bench/results/suite_durations.json (the logs: runs/bench/suite_durations_N.log).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import REPO, LoadMeter, cli, log, write_result

#: One line of pytest's --durations report: "12.34s call     tests/x.py::test_y[...]".
DURATION = re.compile(r"^\s*([\d.]+)s (call|setup|teardown)\s+(.+?)\s*$")
#: pytest's closing line: "3 failed, 804 passed, 8 skipped in 1084.55s (0:18:04)", between
#: rows of "=" unless -q.
SUMMARY = re.compile(r"^=*\s*\d+ \w+.* in [\d.]+s\b")
RESULT = re.compile(r"(\d+) (passed|failed|skipped|errors?)")
SLOWEST = 20


def durations(output: str) -> list[tuple[float, str, str]]:
    """(seconds, phase, test id) of every phase pytest reported, slowest first."""
    rows = [(float(m[1]), m[2], m[3]) for line in output.splitlines()
            if (m := DURATION.match(line))]
    return sorted(rows, reverse=True)


def counts(output: str) -> dict[str, int]:
    """passed/failed/skipped/error, summed over every pytest run in the output (make test
    runs two)."""
    out: dict[str, int] = {}
    for line in output.splitlines():
        if SUMMARY.match(line):
            for n, kind in RESULT.findall(line):
                key = "error" if kind.startswith("error") else kind
                out[key] = out.get(key, 0) + int(n)
    return out


def slow_ids(worktree: Path, env: dict[str, str]) -> set[str]:
    """The ids of the revision's tests marked slow (real MindSpore)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow",
                          "-p", "no:cacheprovider"], cwd=worktree, env=env,
                         capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def run_suite(rev: str, keep_log: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="autotune-suite-") as tmp:
        worktree = Path(tmp) / "repo"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), rev], cwd=REPO,
                       check=True, capture_output=True)
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=worktree,
                                    capture_output=True, text=True).stdout.strip()
            env = {**os.environ, "PYTHONPATH": str(worktree)}
            env.pop("AUTOTUNE_CACHE", None)  # the worktree's own, cold, as on a clean clone
            slow = slow_ids(worktree, env)
            log(f"{rev} ({commit}): the whole suite, {len(slow)} tests marked slow")
            meter = LoadMeter()
            start = time.perf_counter()
            # This checkout's environment, its stamp taken as up to date (-o): the
            # worktree's own setup would install the worktree into it.
            venv = Path(sys.executable).parent.parent
            proc = subprocess.run(["make", "test", f"VENV={venv}", "-o", str(venv / ".installed"),
                                   "ARGS=-q --durations=0 -p no:cacheprovider"],
                                  cwd=worktree, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            load = meter.stop()
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO,
                           capture_output=True)
    output = proc.stdout + proc.stderr
    keep_log.write_text(output)
    rows = durations(output)
    in_slow = sum(s for s, _, test in rows if test in slow)
    return {"rev": rev, "commit": commit, "wall_s": round(wall, 1), "exit_code": proc.returncode,
            "counts": counts(output), "slow_tests": len(slow),
            "slow_s": round(in_slow, 1), "other_s": round(sum(s for s, *_ in rows) - in_slow, 1),
            "foreign_cores": round(load["foreign_cores"], 2),
            "slowest": [{"s": s, "phase": phase, "test": test}
                        for s, phase, test in rows[:SLOWEST]], "log": str(keep_log)}


def report(results: list[dict]) -> None:
    for r in results:
        print(f"\n{r['rev']} ({r['commit']}): {r['wall_s']:.0f} s wall ({r['wall_s'] / 60:.1f} "
              f"min), exit {r['exit_code']}, {r['counts']}; in tests marked slow "
              f"({r['slow_tests']}): {r['slow_s']:.0f} s, the rest {r['other_s']:.0f} s; "
              f"foreign load {r['foreign_cores']:.2f} cores")
        print(f"| {'s':>6} | phase | test |\n|---:|---|---|")
        for row in r["slowest"]:
            print(f"| {row['s']:6.1f} | {row['phase']} | `{row['test']}` |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.suite_durations")
    parser.add_argument("--rev", action="append", required=True,
                        help="a revision to time (repeat: they run in this order)")
    args = parser.parse_args(argv)
    logs = REPO / "runs" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    results = [run_suite(rev, logs / f"suite_durations_{i}.log")
               for i, rev in enumerate(args.rev)]
    report(results)
    write_result("suite_durations", {"results": results}, directory=REPO / "bench" / "results")
    return 0


if __name__ == "__main__":
    cli(main)
