"""Orchestrator overhead of two revisions side by side (issue 19: the Runner seam refactor).

    .venv/bin/python -m bench.seam_overhead --old 26a4878 --new main          # 8 rounds, ~10 min
    .venv/bin/python -m bench.seam_overhead --old 26a4878 --new main --quick  # 2 rounds, ~5 min

Each revision is checked out as a detached git worktree of this repository in a temporary
directory (byte-compiled first, so no run pays for it), and every measurement is a fresh
process started in that worktree: ``python -m autotune sweep`` imports the worktree's
``autotune/`` and ``trials/``, and its trials get the worktree's launch recipe. The two
checkouts alternate in one invocation, ABBA order (old first in odd rounds, new first in
even ones). What is measured, per checkout:

(a) Orchestrator overhead of a short real sweep, as BENCHMARKS.md defines it (the code
    of bench/sweep_costs.py): (sweep wall time - sum of the trial processes' wall times)
    / sweep wall time, and the orchestrator's seconds themselves, split by Optuna's
    timestamps into start-up, per launch (ask to tell less the process, and the gap to
    the next ask), reused proposals and the tail (leaderboard, exit).
    The sweep: ``workload=gpt_tiny search=tiny`` (6 configurations), fixed steps
    (``run.adaptive=false``), ``sweep.seed=0``, no profile of the winner (it is a trial
    process outside the launches, so it would count as orchestrator time), 6 launches
    (``--quick``: 4).
(b) The runner/bare ratio: ``python -m bench.trial_overhead --quick`` once per checkout
    (the trial program, which the refactor does not touch; ~45 s each; ``--no-trial-overhead``
    skips it); ``--trial-overhead-rounds N``: its full protocol with N rounds instead, since
    one quick pass moves by more than a few percent from one pass to the next.

The measuring code (timing, reading the studies) is this checkout's, the same for both.
Committed revisions only: uncommitted edits are not in either worktree.
Results: runs/bench/seam_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import sweep_costs
from bench._common import (
    LoadMeter,
    add_quiet_argument,
    child_env,
    cli,
    load_note,
    log,
    median,
    print_table,
    wait_for_quiet,
    write_result,
)

NAME = "seam_overhead"
#: The sweep both checkouts run: small, fixed, the same proposals (seeded) on either side.
SWEEP_OVERRIDES = ["workload=gpt_tiny", "search=tiny", "run.adaptive=false", "sweep.seed=0",
                   "profile.after_sweep=false"]
SWEEP_TIMEOUT_S = 600


@dataclass
class Checkout:
    """One revision as a detached worktree, and the environment its processes run in."""

    label: str  # "old" or "new"
    rev: str  # as given
    commit: str  # what it resolved to
    root: Path

    @property
    def env(self) -> dict[str, str]:
        # Only this worktree on PYTHONPATH (child_env would add the measuring checkout's).
        env = child_env()
        env["PYTHONPATH"] = str(self.root)
        return env

    @property
    def name(self) -> str:
        return f"{self.label} ({self.commit[:7]})"


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def repo_root() -> Path:
    return Path(git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))


def resolve(repo: Path, rev: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet",
                           f"{rev}^{{commit}}"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"error: {rev!r} is not a commit of {repo}; give a commit, tag or branch",
              file=sys.stderr)
        raise SystemExit(2)
    return proc.stdout.strip()


def add_worktree(repo: Path, label: str, rev: str, commit: str, parent: Path) -> Checkout:
    root = parent / label
    git(repo, "worktree", "add", "--detach", "--quiet", str(root), commit)
    checkout = Checkout(label, rev, commit, root)
    # Byte-compile now, so that the first sweep of a checkout does not pay for it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "autotune", "trials", "bench"],
                   cwd=root, env=checkout.env, capture_output=True, check=True)
    check_imports(checkout)
    return checkout


def check_imports(checkout: Checkout) -> None:
    """The processes started in a worktree must import that worktree's packages."""
    probe = "import autotune, trials; print(autotune.__file__); print(trials.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=checkout.root, env=checkout.env,
                         capture_output=True, text=True, check=True).stdout.split()
    wrong = [f for f in out if not Path(f).resolve().is_relative_to(checkout.root.resolve())]
    if wrong:
        raise SystemExit(f"{checkout.name}: imports {wrong}, not its own worktree "
                         f"{checkout.root}; is the project installed non-editable?")


def remove_worktree(repo: Path, checkout: Checkout) -> None:
    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                    str(checkout.root)], capture_output=True)


# -- the measurements -------------------------------------------------------------------------
def measure_sweep(checkout: Checkout, runs: Path, study: str, n_trials: int,
                  max_wait: float) -> dict[str, Any]:
    """(a) of one sweep of one checkout: bench/sweep_costs.py's overhead and its phases."""
    before = wait_for_quiet(max_wait) if max_wait > 0 else {}
    meter = LoadMeter()
    wall = sweep_costs.sweep(runs, study, n_trials, SWEEP_OVERRIDES, cwd=checkout.root,
                             env=checkout.env)
    finished_at = time.time()
    load = meter.stop()
    result = sweep_costs.load(runs, study)
    return {**sweep_costs.overhead(result, wall),
            **sweep_costs.orchestration_phases(result.trials, wall, finished_at),
            "study": study, "load": {**load, **before}}


def measure_trial_overhead(checkout: Checkout, max_wait: float,
                           protocol: str = "--quick") -> dict[str, Any]:
    """(b): the checkout's own ``bench.trial_overhead`` (``--quick``, or ``--rounds=N``: its
    full protocol), read from its JSON."""
    out = checkout.root / "runs" / "bench" / "trial_overhead.json"
    argv = [sys.executable, "-m", "bench.trial_overhead", protocol, f"--max-wait={max_wait}"]
    proc = subprocess.run(argv, cwd=checkout.root, env=checkout.env, capture_output=True,
                          text=True, timeout=1200)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"{checkout.name}: bench.trial_overhead failed ({proc.returncode}):\n"
                         f"{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    r = json.loads(out.read_text())
    loads = [run["load"] for run in r["runner"] + r["bare"]]
    return {k: r.get(k) for k in ("ratio", "ratio_median_of_rounds", "ratio_of_best",
                                  "runner_step_time_median_s", "bare_step_time_median_s",
                                  "loop_period_ratio", "load_note", "elapsed_s")} | \
        {"loads": loads}


# -- reporting --------------------------------------------------------------------------------
ROUND_HEADERS = ["checkout", "sweep s", "trials s", "orch s", "overhead %", "start-up s",
                 "per launch s", "reused s", "tail s", "launches", "other jobs"]


def round_row(name: str, r: dict) -> list:
    return [name, r["sweep_wall_s"], r["sum_trial_wall_s"], r["orchestrator_s"],
            100 * r["overhead"], r["startup_s"], r["per_launch_s"], r["not_launched_s"],
            r["tail_s"], r["launches"], r["load"]["foreign_cores"]]


def spread(values: list[float]) -> str:
    return f"{min(values):.3g}..{max(values):.3g}"


def summarise(runs: dict[str, list[dict]], names: dict[str, str]) -> dict[str, Any]:
    """Median and range per checkout of each quantity; new/old of the medians and per round."""
    keys = ["overhead", "orchestrator_s", "startup_s", "per_launch_s", "tail_s",
            "sweep_wall_s", "sum_trial_wall_s"]
    out: dict[str, Any] = {label: {k: {"median": median([r[k] for r in rs]),
                                       "min": min(r[k] for r in rs),
                                       "max": max(r[k] for r in rs)} for k in keys}
                           for label, rs in runs.items()}
    out["new_over_old"] = {k: out["new"][k]["median"] / out["old"][k]["median"]
                           if out["old"][k]["median"] else None for k in keys}
    per_round = [n["orchestrator_s"] / o["orchestrator_s"]
                 for o, n in zip(runs["old"], runs["new"])]
    out["orchestrator_s_new_over_old_per_round"] = per_round
    rows = []
    for label in ("old", "new"):
        s = out[label]
        rows.append([names[label], 100 * s["overhead"]["median"],
                     spread([100 * r["overhead"] for r in runs[label]]),
                     s["orchestrator_s"]["median"],
                     spread([r["orchestrator_s"] for r in runs[label]]),
                     s["startup_s"]["median"], s["per_launch_s"]["median"],
                     s["tail_s"]["median"], s["sum_trial_wall_s"]["median"]])
    ratio = out["new_over_old"]
    rows.append(["new/old", ratio["overhead"], "", ratio["orchestrator_s"],
                 spread(per_round), ratio["startup_s"], ratio["per_launch_s"],
                 ratio["tail_s"], ratio["sum_trial_wall_s"]])
    print("\nsummary over rounds (medians; ranges min..max; new/old range: per round)")
    print_table(["checkout", "overhead %", "range", "orch s", "range", "start-up s",
                 "per launch s", "tail s", "trials s"], rows)
    return out


#: Rounds below which the spread of a checkout says nothing, so no verdict is given.
MIN_ROUNDS_FOR_VERDICT = 4


def verdict(summary: dict[str, Any], rounds: int) -> str:
    """Worse only when new's median lies above old's whole range (the noise is that wide)."""
    old, new = summary["old"]["orchestrator_s"], summary["new"]["orchestrator_s"]
    if rounds < MIN_ROUNDS_FOR_VERDICT:
        return (f"no verdict from {rounds} round(s) (needs {MIN_ROUNDS_FOR_VERDICT}): "
                f"orchestrator time new {new['median']:.2f} s, old {old['median']:.2f} s")
    if new["median"] > old["max"]:
        return (f"new's median orchestrator time {new['median']:.2f} s is above every old "
                f"round ({old['min']:.2f}..{old['max']:.2f} s): WORSE than old")
    return (f"new's median orchestrator time {new['median']:.2f} s is within or below old's "
            f"rounds ({old['min']:.2f}..{old['max']:.2f} s): not worse than old")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.seam_overhead",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="revision before the change (commit)")
    parser.add_argument("--new", required=True, help="revision after the change")
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 4-launch sweeps (default: 8 rounds of 6 launches)")
    parser.add_argument("--rounds", type=int, help="old/new pairs of sweeps (default 8; quick 2)")
    parser.add_argument("--n-trials", type=int, help="launches per sweep (default 6; quick 4)")
    parser.add_argument("--no-trial-overhead", action="store_true",
                        help="skip bench.trial_overhead --quick of each checkout")
    parser.add_argument("--trial-overhead-rounds", type=int, metavar="N",
                        help="bench.trial_overhead's full protocol with N rounds per checkout "
                             "instead of --quick")
    parser.add_argument("--keep", action="store_true",
                        help="keep the worktrees and the sweeps' runs (printed at the end)")
    add_quiet_argument(parser)
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 8)
    n_trials = args.n_trials or (4 if args.quick else 6)
    if rounds < 1 or n_trials < 1:
        print("error: --rounds and --n-trials must be at least 1", file=sys.stderr)
        raise SystemExit(2)

    repo = repo_root()
    commits = {"old": resolve(repo, args.old), "new": resolve(repo, args.new)}
    revs = {"old": args.old, "new": args.new}
    tmp = Path(tempfile.mkdtemp(prefix="seam-overhead-"))
    checkouts: dict[str, Checkout] = {}
    started = time.perf_counter()
    try:
        for label in ("old", "new"):
            checkouts[label] = add_worktree(repo, label, revs[label], commits[label], tmp)
        names = {label: c.name for label, c in checkouts.items()}
        log(f"{rounds} round(s), ABBA; each a sweep of {n_trials} launches: "
            f"{' '.join(SWEEP_OVERRIDES)}; {names['old']} vs {names['new']}; worktrees in {tmp}")

        runs: dict[str, list[dict]] = {"old": [], "new": []}
        order = []
        for i in range(rounds):
            sequence = ("old", "new") if i % 2 == 0 else ("new", "old")
            order.append(list(sequence))
            for label in sequence:
                r = measure_sweep(checkouts[label], tmp / "runs", f"{label}-r{i + 1}", n_trials,
                                  args.max_wait)
                runs[label].append(r)
                log(f"round {i + 1} {names[label]}: sweep {r['sweep_wall_s']:.1f} s, "
                    f"orchestrator {r['orchestrator_s']:.2f} s ({100 * r['overhead']:.2f} %), "
                    f"other jobs {r['load']['foreign_cores']:.2f} cores")
            print(f"\nround {i + 1} ({' then '.join(sequence)})")
            print_table(ROUND_HEADERS, [round_row(names[label], runs[label][-1])
                                        for label in sequence])
        summary = summarise(runs, names)
        line = verdict(summary, rounds)
        print(line)

        trial_overhead: dict[str, Any] = {}
        protocol = (f"--rounds={args.trial_overhead_rounds}" if args.trial_overhead_rounds
                    else "--quick")
        if not args.no_trial_overhead:
            for label in ("old", "new"):
                log(f"{names[label]}: python -m bench.trial_overhead {protocol}")
                trial_overhead[label] = measure_trial_overhead(
                    checkouts[label], args.max_wait, protocol)
            rows = [[names[label], t["ratio"], t["ratio_median_of_rounds"], t["ratio_of_best"],
                     t["runner_step_time_median_s"] * 1e3, t["bare_step_time_median_s"] * 1e3]
                    for label, t in trial_overhead.items()]
            rows.append(["new/old", trial_overhead["new"]["ratio"] /
                         trial_overhead["old"]["ratio"], "", "", "", ""])
            print(f"\nrunner/bare (bench.trial_overhead {protocol} of each checkout)")
            print_table(["checkout", "runner/bare", "per-round median", "best runs",
                         "runner ms", "bare ms"], rows)

        loads = [r["load"] for rs in runs.values() for r in rs] + \
            [d for t in trial_overhead.values() for d in t["loads"]]
        note = load_note(loads)
        print(note)
        path = write_result(NAME, {
            "quick": args.quick, "rounds": rounds, "n_trials": n_trials,
            "sweep_overrides": SWEEP_OVERRIDES, "order": order,
            "checkouts": {label: {"rev": c.rev, "commit": c.commit}
                          for label, c in checkouts.items()},
            "runs": runs, "summary": summary, "verdict": line,
            "trial_overhead": trial_overhead, "load_note": note,
            "elapsed_s": time.perf_counter() - started})
        print(f"wrote {path} ({time.perf_counter() - started:.0f} s)")
    finally:
        if args.keep:
            print(f"kept: {tmp} (remove with git worktree remove --force)")
        else:
            for checkout in checkouts.values():
                remove_worktree(repo, checkout)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    cli(main)
