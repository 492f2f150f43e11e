"""Decisions on a machine whose speed drifts (issues 20, 35): two revisions side by side,
each running the real default sweep and ``confirm`` on a quiet machine and under CPU hogs
(switched on and off, or never off).

    .venv/bin/python -m bench.drift --old 26a4878 --new HEAD            # ~70 min
    .venv/bin/python -m bench.drift --old 26a4878 --new HEAD --quick    # a smoke run, ~15 min
    .venv/bin/python -m bench.drift --only new --conditions quiet,persistent,onoff  # issue 35
    .venv/bin/python -m bench.drift --only new --conditions quiet,persistent,onoff \
        --reference-rounds 0 --overrides sweep.race.rounds=3             # a candidate default
    .venv/bin/python -m bench.drift --reanalyse runs/bench/drift        # the tables again

Each revision is a detached git worktree (bench/seam_overhead.py's machinery); every
command is a fresh ``python -m autotune`` process of that worktree. Per revision and
condition, in a study of its own: ``sweep`` (the embedded default: 12 launches, seed 0),
``confirm`` (top 3 + the baseline, 3 rounds), ``report``, ``export``, and ``soak`` up to
the line that names its trial (the soak itself is not what is measured here). The
revisions alternate their order from one condition to the next (ABBA: old quiet, new
quiet, new loaded, old loaded), then a quiet reference.

* **quiet**: before each command, wait up to ``--max-wait`` for other jobs to go quiet.
* a loaded condition: busy processes (bounded: each ends itself at the end of its
  on-phase, and is killed on the way out) follow one fixed schedule from the start of the
  condition, across the sweep and confirm alike (:data:`LOADS`, ``--conditions``):

  - **loaded** (issue 20): ``--hog-procs`` processes, off for the first
    ``--hog-first-off`` s (the baseline is measured on a quiet machine, as it was when
    the issue was found), then on ``--hog-on`` s, off ``--hog-off`` s, repeated;
  - **persistent** (issue 35): one process that never stops, from the start;
  - **onoff** (issue 35): one process, 30 s on, 30 s off, from the start.
* **reference** (quiet, the measuring checkout's trial program): every configuration a
  sweep stopped as slow and never completed, and each sweep's two fastest, re-measured in
  ``--reference-rounds`` rounds, shuffled within each round; a configuration is "good"
  when its median is within 10 % of the fastest median.

Reported per revision and condition, side by side:

(a) the configuration ``export`` took, and whether it is the same quiet and loaded;
(b) configurations stopped as slow and never completed, and how many of them are good;
(c) for each finalist ``confirm`` tested against the baseline: does the sweep's 95 %
    interval of its gain (the leaderboard's, read with the revision's own code) contain
    the within-round gain ``confirm`` measured (target >= 90 %);
(d) the trials each command names as its winner (sweep summary, confirm, report, export,
    soak), and the number of distinct configurations among them (target 1). A revision
    that prints no pick line is read by what it does print: the sweep's profiled winner,
    confirm's top row, the report's "best:" line.

Everything a command printed and each study stay in ``runs/bench/drift/<revision>-<condition>/``;
``--reanalyse`` recomputes the tables from them. Results: runs/bench/drift.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autotune.study.layout import DB_NAME, sqlite_url
from autotune.study.schema.confirm import ConfirmVerdict
from autotune.study.schema.keys import BASELINE_ROLE
from bench._common import (
    RESULTS_DIR,
    LoadMeter,
    add_quiet_argument,
    cli,
    log,
    median,
    print_table,
    run_trial,
    wait_for_quiet,
    write_result,
)
from bench.seam_overhead import Checkout, add_worktree, remove_worktree, repo_root, resolve
from trials.contract.outcomes import Outcome
from trials.contract.schema import CostPriors

NAME = "drift"
OUT = RESULTS_DIR / NAME
#: The real default sweep; the seed is fixed so that both revisions start alike.
SWEEP = ["sweep.seed=0"]
#: --quick: a smaller space and study, one finalist.
QUICK_SWEEP = ["sweep.seed=0", "search=tiny", "sweep.n_trials=4"]
QUICK_CONFIRM = ["confirm.top_k=1", "confirm.repeats=2"]
#: The reference's runs: a fixed measurement (a configuration stopped as slow may run at
#: a hundredth of the best's speed: an adaptive one would take minutes to settle it).
REFERENCE_RUN = ["run.adaptive=false", "run.warmup_steps=4", "run.measure_steps=8"]
#: A reference run past this is far from good (the best makes its steps in ~10 s).
REFERENCE_TIMEOUT_S = 120
#: "Good": within this fraction of the fastest reference median (the issue's 10 %).
GOOD_WITHIN = 0.10
COMMAND_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Load:
    """A hog's schedule from the start of a condition: ``procs`` busy processes, off
    ``first_off`` s, then on ``on`` s and off ``off`` s, repeated."""

    procs: int
    first_off: float
    on: float
    off: float


#: Every condition a run can be measured under (None: quiet, waiting for other jobs to go
#: quiet before each command). ``loaded``'s schedule follows the --hog-* arguments.
LOADS: dict[str, Load | None] = {
    "quiet": None,
    "loaded": Load(os.cpu_count() or 2, 45.0, 60.0, 60.0),
    "persistent": Load(1, 0.0, math.inf, 0.0),
    "onoff": Load(1, 0.0, 30.0, 30.0),
}

HOG = ("import sys, time\n"
       "end = time.monotonic() + float(sys.argv[1])\n"
       "while time.monotonic() < end:\n"
       "    pass\n")

#: Read a study with the revision's own code: its records, the sweep's gain intervals
#: (annotated as its leaderboard does), and what confirm stored.
PROBE = r"""
import json, sys
import optuna
from autotune.study.records import CONFIRM_STUDY_KEY, load_records
try:
    from autotune.study.selection import annotate
except ImportError:
    from autotune.study.noise import annotate
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
records = load_records(study)
annotate(records, float(sys.argv[3]))
out = []
for r in records:
    g = r.vs_baseline
    reason = getattr(r.reason, "value", r.reason)
    out.append({"number": r.number, "params": r.params, "state": str(r.state),
                "reason": None if reason is None else str(reason),
                "tokens_per_s": r.tokens_per_s, "reused_from": r.reused_from, "role": r.role,
                "gain": None if g is None else [g.ratio, g.low, g.high]})
print(json.dumps({"trials": out, "confirm": study.user_attrs.get(CONFIRM_STUDY_KEY) or {}},
                 default=str))
"""


# -- the hog -----------------------------------------------------------------------------------
class Hog:
    """Busy processes on a fixed schedule from ``start()``: off ``first_off`` s, then on
    ``on`` s and off ``off`` s, repeated until ``stop()``. Each process ends itself at the
    end of its on-phase; ``stop()`` kills any left."""

    def __init__(self, procs: int, first_off: float, on: float, off: float) -> None:
        self.procs, self.first_off, self.on, self.off = procs, first_off, on, off
        self.intervals: list[list[float]] = []
        self._stop = threading.Event()
        self._running: list[subprocess.Popen] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "Hog":
        self._thread.start()
        return self

    def _loop(self) -> None:
        if self._stop.wait(self.first_off):
            return
        while not self._stop.is_set():
            began = time.time()
            self._running = [subprocess.Popen([sys.executable, "-c", HOG, str(self.on)])
                             for _ in range(self.procs)]
            self.intervals.append([began, began + self.on])
            self._stop.wait(None if math.isinf(self.on) else self.on)
            self._reap()
            self.intervals[-1][1] = min(self.intervals[-1][1], time.time())
            if self._stop.wait(self.off):
                return

    def _reap(self) -> None:
        for proc in self._running:
            proc.kill()
            proc.wait(timeout=10)
        self._running = []

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._reap()
        if self.intervals:
            self.intervals[-1][1] = min(self.intervals[-1][1], time.time())


def load_of(condition: str, args) -> Load | None:
    """The condition's hog schedule (``loaded``'s from the --hog-* arguments)."""
    if condition == "loaded":
        return Load(args.hog_procs, args.hog_first_off, args.hog_on, args.hog_off)
    return LOADS[condition]


# -- one revision under one condition -----------------------------------------------------------
def env_of(checkout: Checkout) -> dict[str, str]:
    """The revision's environment, with a cache of its own: the revisions store the CPU
    peak in different formats (the old one cannot read the new one's entry)."""
    return {**checkout.env, "AUTOTUNE_CACHE": str(checkout.root / ".cache-autotune")}


def autotune_cmd(checkout: Checkout, verb: str, overrides: list[str], log_path: Path, *,
                 stop_on: re.Pattern | None = None) -> dict[str, Any]:
    """``python -m autotune <verb>`` in the revision's worktree; stdout+stderr to log_path.
    With ``stop_on``, the command's process group is stopped at the first matching line."""
    start = time.perf_counter()
    meter = LoadMeter()
    with open(log_path, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "autotune", verb, *overrides],
                                cwd=checkout.root, env=env_of(checkout), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        stopped = False
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        for line in proc.stdout:
            sink.write(line)
            if stop_on is not None and stop_on.search(line):
                os.killpg(proc.pid, signal.SIGKILL)
                stopped = True
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                break
        rc = proc.wait()
    return {"verb": verb, "rc": 0 if stopped else rc, "wall_s": time.perf_counter() - start,
            "load": meter.stop(), "stopped_at_line": stopped}


def run_condition(checkout: Checkout, condition: str, where: Path, args) -> dict[str, Any]:
    where.mkdir(parents=True, exist_ok=True)
    storage = sqlite_url(where / DB_NAME)
    common = [f"sweep.storage={storage}", f"sweep.runs_dir={where / 'runs'}", "sweep.study=drift",
              "sweep.progress=false"]
    sweep = [*common, *(QUICK_SWEEP if args.quick else SWEEP), *args.overrides]
    confirm = [*sweep, *(QUICK_CONFIRM if args.quick else [])]
    steps = [("sweep", sweep, None),
             ("confirm", confirm, None),
             ("report", sweep, None),
             ("export", [*sweep, f"export.out={where / 'export'}", "export.overwrite=true"], None),
             ("soak", [*sweep, f"soak.out={where / 'soak'}"], SOAK_TRIAL)]
    load = load_of(condition, args)
    hog = None if load is None else Hog(load.procs, load.first_off, load.on, load.off)
    started = time.time()
    if hog:
        hog.start()
    commands = []
    try:
        for verb, overrides, stop_on in steps:
            waited = wait_for_quiet(args.max_wait) if hog is None and args.max_wait > 0 else {}
            log(f"{checkout.name} {condition}: {verb}")
            result = autotune_cmd(checkout, verb, overrides, where / f"{verb}.log",
                                  stop_on=stop_on)
            commands.append({**result, "waited": waited})
            if result["rc"] != 0 and verb in ("sweep", "confirm"):
                tail = (where / f"{verb}.log").read_text()[-2000:]
                raise SystemExit(f"{checkout.name} {condition}: {verb} failed "
                                 f"(rc {result['rc']}):\n{tail}")
    finally:
        if hog:
            hog.stop()
    meta = {"revision": checkout.name, "commit": checkout.commit, "condition": condition,
            "started": started, "ended": time.time(), "commands": commands,
            "hog": None if hog is None else {"procs": hog.procs, "intervals": hog.intervals},
            "study": probe(checkout, storage)}
    (where / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    return meta


def probe(checkout: Checkout, storage: str) -> dict[str, Any]:
    # The CPU profile's run-to-run noise prior, as the revision's sweep assumes it.
    hardware = yaml.safe_load((checkout.root / "conf" / "hardware" / "cpu.yaml").read_text())
    prior = (hardware.get("cost") or {}).get("run_to_run_cv", CostPriors.run_to_run_cv)
    proc = subprocess.run([sys.executable, "-c", PROBE, storage, "drift", str(prior)],
                          cwd=checkout.root, env=env_of(checkout), capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{checkout.name}: reading its study failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- reading what each command named -------------------------------------------------------------
PICK = re.compile(r"pick \(what export and soak take\): trial #(\d+)")
SOAK_TRIAL = re.compile(r"^soak: trial (\d+)")
NAMED = {
    "sweep": [PICK, re.compile(r"profiling the winner, trial (\d+)")],
    "confirm": [PICK, re.compile(r"^\s*trial\s+sweep tok/s.*\n\s*(\d+)\s", re.M)],
    "report": [PICK, re.compile(r"^best: trial #(\d+)", re.M)],
    "export": [re.compile(r"exported trial (\d+)")],
    "soak": [re.compile(r"^soak: trial (\d+)", re.M)],
}


def named_trials(where: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for verb, patterns in NAMED.items():
        path = where / f"{verb}.log"
        text = path.read_text() if path.exists() else ""
        found = None
        for pattern in patterns:
            hits = pattern.findall(text)
            if hits:
                found = int(hits[-1])
                break
        out[verb] = found
    return out


#: Knob values the revisions spell differently (before issue 20 recompute was a bool).
SPELLINGS = {"train.recompute": {True: "full", False: "none", "True": "full", "False": "none"}}


def canonical(params: dict) -> dict:
    """A configuration in the measuring checkout's spelling of its knob values."""
    return {k: SPELLINGS.get(k, {}).get(v, v) for k, v in params.items()}


def key(params: dict) -> str:
    return json.dumps(canonical(params), sort_keys=True)


def label(params: dict, baseline: dict) -> str:
    changed = {k: v for k, v in params.items() if baseline.get(k) != v}
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(changed.items())) \
        or "the baseline"


#: The reasons (as the probe prints them) of a configuration stopped as slow.
LOST_AS_SLOW = (Outcome.SLOW.value, Outcome.CONTENDED.value)


def lost_as_slow(trials: list[dict]) -> list[dict]:
    """Configurations a sweep stopped as slow (or contended) and never completed."""
    completed = {key(t["params"]) for t in trials if t["state"] == "COMPLETE"}
    lost: dict[str, dict] = {}
    for t in trials:
        if t["reason"] in LOST_AS_SLOW and key(t["params"]) not in completed:
            lost.setdefault(key(t["params"]), t["params"])
    return list(lost.values())


def fastest(trials: list[dict], n: int) -> list[dict]:
    done = [t for t in trials if t["state"] == "COMPLETE" and t["tokens_per_s"]
            and t["reused_from"] is None]
    return [t["params"] for t in sorted(done, key=lambda t: -t["tokens_per_s"])[:n]]


def coverage(study: dict) -> list[dict]:
    """(c): each confirmed finalist's sweep interval against confirm's within-round gain."""
    by_number = {t["number"]: t for t in study["trials"]}
    rows = []
    for number, summary in sorted(study["confirm"].items(), key=lambda kv: int(kv[0])):
        test = ConfirmVerdict.from_json(summary).vs_baseline
        trial = by_number.get(int(number))
        if test is None or trial is None or trial["gain"] is None:
            continue
        _, low, high = trial["gain"]
        rows.append({"trial": int(number), "sweep_gain": trial["gain"],
                     "confirm_gain": test.ratio, "covered": low <= test.ratio <= high})
    return rows


# -- the reference ------------------------------------------------------------------------------
def overrides_of(params: dict) -> tuple[list[str], int]:
    params = canonical(params)
    split = str(params.get("parallel.split", "1x1x1"))
    return [f"{k}={v}" for k, v in params.items()], int(split.split("x")[0])


def reference(configs: list[dict], rounds: int, max_wait: float, seed: int = 0) -> dict[str, Any]:
    """Quiet re-measurements of ``configs``: tokens/s per configuration, round by round."""
    rng = random.Random(seed)
    runs: dict[str, list[float]] = {key(c): [] for c in configs}
    for rep in range(rounds):
        order = list(configs)
        rng.shuffle(order)
        for i, params in enumerate(order):
            overrides, world = overrides_of(params)
            log(f"reference round {rep + 1}/{rounds}, {i + 1}/{len(order)}: {' '.join(overrides)}")
            run = run_trial([*overrides, *REFERENCE_RUN], quiet_wait_s=max_wait,
                            world_size=world, timeout_s=REFERENCE_TIMEOUT_S)
            # A run that could not make its steps in the time is far from good: 0.
            runs[key(params)].append(run.tokens_per_s if run.ok else
                                     0.0 if run.rc is None else float("nan"))
    medians = {k: median([v for v in vs if v == v]) if any(v == v for v in vs) else None
               for k, vs in runs.items()}
    return {"runs": runs, "medians": medians}


# -- analysis -----------------------------------------------------------------------------------
def analyse(metas: dict[str, dict], ref: dict[str, Any] | None) -> dict[str, Any]:
    medians = (ref or {}).get("medians") or {}
    top = max((m for m in medians.values() if m), default=None)
    out: dict[str, Any] = {"reference_fastest_tokens_per_s": top, "runs": {}}
    exported: dict[str, dict[str, str]] = {}
    for name, meta in metas.items():
        trials = meta["study"]["trials"]
        params_of = {t["number"]: t["params"] for t in trials}
        base = next((t["params"] for t in trials if t["role"] == BASELINE_ROLE), {})
        named = meta["named"]
        configs = {verb: (None if n is None else key(params_of.get(n, {})))
                   for verb, n in named.items()}
        distinct = {c for c in configs.values() if c is not None}
        lost = lost_as_slow(trials)
        good = [p for p in lost if top and (medians.get(key(p)) or 0) >= (1 - GOOD_WITHIN) * top]
        cover = coverage(meta["study"])
        export_params = params_of.get(named.get("export"))
        exported.setdefault(meta["revision"], {})[meta["condition"]] = \
            None if export_params is None else key(export_params)
        hog = meta.get("hog") or {}
        hog_s = sum(b - a for a, b in hog.get("intervals") or [])
        out["runs"][name] = {
            "revision": meta["revision"], "condition": meta["condition"],
            "wall_s": meta["ended"] - meta["started"], "hog_on_s": hog_s,
            "commands": hog_per_command(meta),
            "named": named, "distinct_winners": len(distinct),
            "exported": None if export_params is None else label(export_params, base),
            "lost_as_slow": [label(p, base) for p in lost],
            "lost_good": [label(p, base) for p in good],
            "coverage": cover,
            "covered": sum(r["covered"] for r in cover), "tested": len(cover),
            # What covering costs: a wide interval covers more and claims less.
            "median_interval_width": median([c["sweep_gain"][2] - c["sweep_gain"][1]
                                             for c in cover]) if cover else None,
            "stopped_slow_trials": sum(1 for t in trials if t["reason"] == Outcome.SLOW.value),
            "contended_trials": sum(1 for t in trials
                                    if t["reason"] == Outcome.CONTENDED.value),
        }
    # Each loaded condition against the same revision's quiet one: the same export? how
    # much longer (the sweep, and every command together)?
    out["export_agrees"] = {rev: {cond: None if None in (d.get("quiet"), got)
                                  else got == d["quiet"]
                                  for cond, got in d.items() if cond != "quiet"}
                            for rev, d in exported.items()}
    quiet = {r["revision"]: r for r in out["runs"].values() if r["condition"] == "quiet"}
    for r in out["runs"].values():
        q = quiet.get(r["revision"])
        r["sweep_vs_quiet"] = None if q is None else \
            r["commands"]["sweep"]["wall_s"] / q["commands"]["sweep"]["wall_s"]
        # The commands' own time: a quiet condition's waits for quiet are not the sweep's.
        r["wall_vs_quiet"] = None if q is None else commands_s(r) / commands_s(q)
    return out


def commands_s(run: dict) -> float:
    return sum(c["wall_s"] for c in run["commands"].values())


def hog_per_command(meta: dict) -> dict[str, dict]:
    """Each command's wall time and the seconds the hog was on during it. (The bench's
    own load meter cannot tell: the hog is its child, so its CPU counts as the bench's.)"""
    out, t = {}, meta["started"]
    intervals = (meta.get("hog") or {}).get("intervals") or []
    for c in meta["commands"]:
        t += (c.get("waited") or {}).get("waited_s", 0.0)
        end = t + c["wall_s"]
        on = sum(max(0.0, min(end, b) - max(t, a)) for a, b in intervals)
        out[c["verb"]] = {"wall_s": c["wall_s"], "rc": c["rc"], "hog_on_s": on}
        t = end
    return out


def print_tables(result: dict[str, Any]) -> None:
    rows = []
    for r in result["runs"].values():
        named = " ".join(f"{v[:4]}#{n}" for v, n in r["named"].items())
        hog = r["commands"]
        ratio = "-" if r["sweep_vs_quiet"] is None else \
            f"{r['sweep_vs_quiet']:.2f}x / {r['wall_vs_quiet']:.2f}x"
        rows.append([r["revision"], r["condition"], f"{r['wall_s'] / 60:.1f}", ratio,
                     f"{hog['sweep']['hog_on_s']:.0f}/{hog['sweep']['wall_s']:.0f}",
                     f"{hog['confirm']['hog_on_s']:.0f}/{hog['confirm']['wall_s']:.0f}",
                     r["exported"],
                     f"{len(r['lost_good'])}/{len(r['lost_as_slow'])}",
                     f"{r['covered']}/{r['tested']}",
                     "-" if r["median_interval_width"] is None
                     else f"{100 * r['median_interval_width']:.0f}",
                     r["distinct_winners"], named])
    print_table(["revision", "condition", "min", "vs quiet: sweep / all", "sweep hog/s",
                 "confirm hog/s", "(a) exported",
                 "(b) good lost/lost", "(c) covered", "width %", "(d) winners", "named"], rows)
    for rev, by_condition in result["export_agrees"].items():
        for condition, agrees in by_condition.items():
            print(f"(a) {rev}: exported configuration quiet vs {condition}: "
                  f"{'same' if agrees else 'different' if agrees is not None else 'n/a'}")
    for r in result["runs"].values():
        if r["lost_as_slow"]:
            print(f"(b) {r['revision']} {r['condition']}: lost as slow: "
                  f"{'; '.join(r['lost_as_slow'])} (good: {'; '.join(r['lost_good']) or 'none'})")
        for c in r["coverage"]:
            g = c["sweep_gain"]
            print(f"(c) {r['revision']} {r['condition']} trial {c['trial']}: sweep "
                  f"{100 * g[0]:+.1f} % ({100 * g[1]:+.1f}..{100 * g[2]:+.1f}), confirm "
                  f"{100 * c['confirm_gain']:+.1f} %: {'covered' if c['covered'] else 'MISSED'}")
    top = result.get("reference_fastest_tokens_per_s")
    if top:
        print(f"reference: fastest median {top:,.0f} tokens/s; good = within "
              f"{100 * GOOD_WITHIN:.0f} % of it")


# -- main ---------------------------------------------------------------------------------------
def read_metas(root: Path) -> dict[str, dict]:
    metas = {}
    for where in sorted(p for p in root.iterdir() if (p / "meta.json").exists()):
        meta = json.loads((where / "meta.json").read_text())
        meta["named"] = named_trials(where)
        metas[where.name] = meta
    return metas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="26a4878", help="the revision before issue 20")
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--quick", action="store_true", help="search=tiny, 4 launches, top 1")
    parser.add_argument("--only", choices=["old", "new"], help="one revision (a smoke run)")
    loaded = LOADS["loaded"]
    parser.add_argument("--conditions", default="quiet,loaded",
                        help=f"comma-separated, in order; of {', '.join(LOADS)}")
    parser.add_argument("--hog-procs", type=int, default=loaded.procs, help="loaded's")
    parser.add_argument("--hog-first-off", type=float, default=loaded.first_off)
    parser.add_argument("--hog-on", type=float, default=loaded.on)
    parser.add_argument("--hog-off", type=float, default=loaded.off)
    parser.add_argument("--reference-rounds", type=int, default=2)
    parser.add_argument("--overrides", nargs="*", default=[], metavar="KEY=VALUE",
                        help="more overrides for every command of every condition (a "
                             "candidate default: sweep.race.rounds=3)")
    parser.add_argument("--reanalyse", type=Path, metavar="DIR",
                        help="recompute the tables from an earlier run's directory")
    add_quiet_argument(parser)
    args = parser.parse_args()
    if args.reanalyse:
        metas = read_metas(args.reanalyse)
        ref_path = args.reanalyse / "reference.json"
        ref = json.loads(ref_path.read_text()) if ref_path.exists() else None
        if ref is None:  # the sweeps ran, the reference did not: measure it now
            ref = measure_reference(metas, args, args.reanalyse)
        finish(metas, ref, args, {m["revision"]: m["commit"] for m in metas.values()})
        return
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    unknown = [c for c in conditions if c not in LOADS]
    if unknown or not conditions:
        parser.error(f"--conditions: {', '.join(unknown) or 'none given'}; choose from "
                     f"{', '.join(LOADS)}")
    repo = repo_root()
    labels = [args.only] if args.only else ["old", "new"]
    revs = {"old": args.old, "new": args.new}
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in OUT.iterdir():
        if stale.is_dir():
            subprocess.run(["rm", "-rf", str(stale)], check=True)
    tmp = Path(tempfile.mkdtemp(prefix="autotune-drift-"))
    checkouts = {lab: add_worktree(repo, lab, revs[lab], resolve(repo, revs[lab]), tmp)
                 for lab in labels}
    # ABBA: the revisions' order alternates from one condition to the next.
    order = [(lab, condition) for i, condition in enumerate(conditions)
             for lab in (labels if i % 2 == 0 else labels[::-1])]
    metas: dict[str, dict] = {}
    try:
        for lab, condition in order:
            where = OUT / f"{lab}-{condition}"
            metas[where.name] = run_condition(checkouts[lab], condition, where, args)
            metas[where.name]["named"] = named_trials(where)
    finally:
        for checkout in checkouts.values():
            remove_worktree(repo, checkout)
    ref = measure_reference(metas, args, OUT)
    finish(metas, ref, args, {c.name: c.commit for c in checkouts.values()})


def measure_reference(metas: dict[str, dict], args, where: Path) -> dict[str, Any]:
    """The quiet reference of every configuration lost as slow and each sweep's two
    fastest, written to ``where/reference.json``."""
    configs: dict[str, dict] = {}
    for meta in metas.values():
        for params in lost_as_slow(meta["study"]["trials"]) + \
                fastest(meta["study"]["trials"], 2):
            configs.setdefault(key(params), canonical(params))
    log(f"reference: {len(configs)} configurations x {args.reference_rounds} rounds, quiet")
    ref = reference(list(configs.values()), args.reference_rounds, args.max_wait)
    (where / "reference.json").write_text(json.dumps(ref, indent=1))
    return ref


def finish(metas: dict[str, dict], ref: dict[str, Any], args, revisions: dict) -> None:
    result = analyse(metas, ref)
    result["settings"] = {k: str(v) for k, v in vars(args).items()}
    result["revisions"] = revisions
    print_tables(result)
    write_result(NAME, result)


if __name__ == "__main__":
    cli(main)
