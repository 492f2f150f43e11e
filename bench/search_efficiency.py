"""How many trial-seconds does each searcher need to find the optimum? Replayed searches.

A landscape is recorded once (``bench.landscape_record``): every point of a space really
run, step by step. Three are committed: ``bench/data/landscape_cpu.json.gz`` (the GPT's
execution knobs, 96 points; the default), ``bench/data/landscape_data.json.gz`` (the
data-bound ``image_cnn``'s pipeline knobs beside mode and precision, 64 points) and
``bench/data/landscape_small.json.gz`` (the default ``gpt_small`` with the memory-optimize
level, 32 points; recorded after the defaults were chosen on the other two); each file
names its space, the overrides it was recorded with and its replay memory budget. Here
the real sweep loop (``autotune.sweep.Sweep``: the sampler, the baseline, the OOM and slow
rules, racing, scoring, selection) runs against one, with one change: a trial's process
is replaced by its recorded run (:class:`ReplayRunner`). A point recorded more than once
(``bench.landscape_record --repeats``) replays its run of median tokens/s, and that
median is its true value: one run is itself a draw of the run-to-run noise, which the
replay adds again. Each replayed run is that run with its step times scaled by a
run-to-run factor exp(N(0, cv)), cv pooled over the points recorded more than once, so a
rerun of a point differs as a real one would. The memory budget
is applied step by step as the trial's guard would (each step keeps its peak), and a trial
stopped as slow costs its time up to the step that decided it. The searchers start from
the landscape's baseline (MindSpore's own defaults: PyNative, fp32, one process, one data
worker), not from the optimum.

Searchers (each for ``--seeds`` seeds, the same budget of launches):

- grid: every point in a seeded order (Optuna's GridSampler);
- random;
- tpe-no-pruning: TPE with the slow rule off and no final race (grid, random and this are
  plain samplers: the cost model seeds none of them and no one-knob neighbours go first;
  until 2026-12-04 the model seeded them too, so earlier reference rows on the GPT
  landscape had its seeds);
- default: the default sweep (TPE, the slow rule; where the cost model has no terms for
  the workload, a CNN, the baseline's one-knob neighbours first, in the space's knob order,
  ``sweep.neighbours=null``; where it has, the cost model refitted after each
  measured trial and its 3 best predictions queued one at a time as soon as it predicts:
  ``sweep.predict.enqueue_best=3``, ``sweep.predict.trust_time_error=1``; no racing of
  each trial; the final race of the best and the finalists within noise of it once the
  budget is spent, its runs charged and its pick scored);
- default-no-model: the default sweep without the model's seeding
  (``sweep.predict.enqueue_best=0``);
- default+race: the default sweep with ``sweep.race.rounds=1``;
- default+gated: the default sweep seeded only once the model's step-time error is at
  most 0.15 (``sweep.predict.trust_time_error=0.15``, the default until 2026-12-05).

Reported: trial-seconds until the sweep's current pick is within 3 % of the grid optimum
(median, p90), against the full grid's trial-seconds; the chance that the pick at the
end of the budget is within 3 %.

    .venv/bin/python -m bench.search_efficiency --jobs 2        # 50 seeds x 7 searchers
    .venv/bin/python -m bench.search_efficiency --landscape bench/data/landscape_data.json.gz
    .venv/bin/python -m bench.search_efficiency --seeds 5       # a quick look

``tests/search/test_search_replay.py`` checks that this in-process replay and the real sweep
driving a replay trial program (``bench/replay_trial.py``) make the same decisions.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import io
import json
import math
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench._common import REPO, cli, log, print_table, write_result
from trials.contract.vocabulary import LEGACY_RECOMPUTE

NAME = "search_efficiency"
LANDSCAPE = REPO / "bench" / "data" / "landscape_cpu.json.gz"
WITHIN = 0.03
#: Seconds from a trial's stop decision to its processes being gone (poll + kill).
STOP_COST_S = 0.5

#: The reference searchers are plain samplers: no slow rule, no final race, no seeds from
#: the cost model, no one-knob neighbours first (what autotune adds to the sampler is what
#: they are the reference for).
PLAIN = ["sweep.stop.slow_ratio=0", "sweep.stop.slow_warmup_ratio=0", "sweep.race.final_rounds=0",
         "sweep.predict.enqueue_best=0", "sweep.neighbours=false"]
SEARCHERS: dict[str, list[str]] = {
    "grid": ["sweep.sampler=grid", *PLAIN],
    "random": ["sweep.sampler=random", *PLAIN],
    "tpe-no-pruning": ["sweep.sampler=tpe", *PLAIN],
    "default": [],
    "default-no-model": ["sweep.predict.enqueue_best=0"],
    "default+race": ["sweep.race.rounds=1"],
    "default+gated": ["sweep.predict.trust_time_error=0.15"],
}
#: The searchers a plain run compares (the rest are candidate defaults: bench.search_defaults).
COMPARED = tuple(SEARCHERS)
#: Candidate settings of the default searcher, each one change from today's default
#: (bench/search_defaults.py chooses among them on one landscape, scores on the other).
CANDIDATES: dict[str, list[str]] = {
    "default": [],
    "startup-3": ["sweep.n_startup_trials=3"],
    "startup-10": ["sweep.n_startup_trials=10"],
    "neighbours": ["sweep.neighbours=true"],
    # The default until 2026-12-06: neighbours never, the model's seeds or the sampler.
    "no-neighbours": ["sweep.neighbours=false"],
    "neighbours+startup-3": ["sweep.neighbours=true", "sweep.n_startup_trials=3"],
    "no-model": ["sweep.predict.enqueue_best=0"],
    "gated": ["sweep.predict.trust_time_error=0.15"],
    # The default since 2026-12-05; kept so that the measurement that chose it reruns.
    "model-always": ["sweep.predict.trust_time_error=1"],
    "slow-0.3": ["sweep.stop.slow_ratio=0.3"],
    "slow-0.7": ["sweep.stop.slow_ratio=0.7"],
    "race-1": ["sweep.race.rounds=1"],
    "race-3": ["sweep.race.rounds=3"],
    "no-final-race": ["sweep.race.final_rounds=0"],
    "finalists-3": ["sweep.race.finalists=3"],
    "finalists-4": ["sweep.race.finalists=4"],
    "finalists-10": ["sweep.race.finalists=10"],
}
SEARCHERS.update({name: flags for name, flags in CANDIDATES.items() if name not in SEARCHERS})


def key(params: dict) -> str:
    return json.dumps({k: params[k] for k in sorted(params)}, default=str)


def in_modes(params: dict) -> dict:
    """Recorded params in today's vocabulary: the landscape was recorded when
    ``train.recompute`` was on/off (true = full)."""
    value = params.get("train.recompute")
    if isinstance(value, bool):
        return {**params, "train.recompute": LEGACY_RECOMPUTE[value]}
    return params


class Landscape:
    """The recorded runs, by configuration."""

    def __init__(self, path: Path = LANDSCAPE) -> None:
        with gzip.open(path, "rt") as fh:
            data = json.load(fh)
        self.space = {k: [in_modes({k: v})[k] for v in values]
                      for k, values in data["space"].items()}
        self.path = path
        self.search = data.get("search", "landscape_cpu")
        self.search_config = data.get("search_config")
        self.fixed = [o for o in data.get("fixed", [])
                      if not o.startswith("guard.memory_budget_gib")]
        #: The replay's memory budget per rank: one that rules part of the landscape out.
        self.budget_gib = float(data["budget_gib"])
        #: Every recorded run of each point (its grid run, then any repeats).
        self.runs: dict[str, list[dict]] = {}
        for r in data["runs"]:
            r = in_periods({**r, "params": in_modes(r["params"])})
            self.runs.setdefault(key(r["params"]), []).append(r)
        #: The run each point replays, and whose tokens/s is its true value: the median of
        #: its recorded runs (a failed run counts as 0 tokens/s). One run is itself a draw
        #: of the run-to-run noise; the replay adds that noise again on top of it, so a
        #: point's truth is the median of the runs recorded, not its first draw.
        self.grid = {k: median_run(rs) for k, rs in self.runs.items()}

    @functools.cached_property
    def base(self) -> list[str]:
        """The sweep's overrides that compose the recorded trials: the space, then the
        fixed overrides it was recorded with (the memory budget is the replay's own)."""
        return [f"search={self.search}",
                *search_path(self.search, self.search_config, self.path), *self.fixed]

    def run_to_run_cv(self) -> float:
        """Pooled CV of tokens/s over the points recorded more than once."""
        sum_sq, dof = 0.0, 0
        for runs in self.runs.values():
            values = [r["tokens_per_s"] for r in runs if r["tokens_per_s"]]
            if len(values) >= 2:
                logs = np.log(values)
                sum_sq += float(((logs - logs.mean()) ** 2).sum())
                dof += len(values) - 1
        return math.sqrt(sum_sq / dof) if dof else 0.0

    def peak(self, run: dict) -> float:
        return max((s["peak_rss_gib"] for s in run["steps"]), default=0.0)

    def true_value(self, params: dict, budget_gib: float) -> float | None:
        """Recorded tokens/s of a point that completes within the budget, else None."""
        run = self.grid[key(params)]
        if run["outcome"] != "ok" or self.peak(run) > budget_gib:
            return None
        return run["tokens_per_s"]

    def optimum(self, budget_gib: float) -> tuple[dict, float]:
        best = max((r for r in self.grid.values()
                    if self.true_value(r["params"], budget_gib) is not None),
                   key=lambda r: r["tokens_per_s"])
        return best["params"], best["tokens_per_s"]

    def grid_seconds(self, budget_gib: float) -> float:
        """Trial-seconds of the full grid as the replay charges them (no pruning)."""
        return sum(charged_wall(r, r["steps"], math.inf if self.peak(r) <= budget_gib
                                else budget_gib)[0] for r in self.grid.values())


def search_path(name: str, config: dict | None, path: Path) -> list[str]:
    """The overrides that find the landscape's search space ``name``: none where
    conf/search/ has it; else a config directory written from the copy the file carries
    (bench.landscape_record writes one since 2026-12-05), on Hydra's search path, so that
    a landscape recorded elsewhere replays here. ValueError when neither has it."""
    from trials.contract.schema import CONF_DIR

    if (CONF_DIR / "search" / f"{name}.yaml").exists():
        return []
    if not config:
        raise ValueError(f"{path} names the search space {name!r}, which conf/search/ lacks "
                         f"and the file does not carry: add conf/search/{name}.yaml (its "
                         "knobs and baseline) or record it again with bench.landscape_record")
    import hashlib

    import yaml

    # The knobs keep their order: the default sweep changes them one at a time in it.
    text = yaml.safe_dump(config, sort_keys=False)
    root = Path(tempfile.gettempdir()) / (
        "autotune-landscape-search-" + hashlib.sha256(text.encode()).hexdigest()[:12])
    (root / "search").mkdir(parents=True, exist_ok=True)
    (root / "search" / f"{name}.yaml").write_text(text)
    return [f"hydra.searchpath=[file://{root}]"]


def in_periods(run: dict) -> dict:
    """The run with each step's time the loop's period, as the trial program measures it
    since 2026-12-05: the time from the previous step's record to its own (``t_s``), the
    first step's as recorded; its tokens/s again from those times. A landscape recorded
    before timed the fetch and the step alone, which left out what the loop does between
    steps (image_cnn: 18-37 ms a step, 1.1-1.6x the step); for a run recorded since, the
    two agree."""
    from trials.contract.scorecard import throughput

    steps = [dict(s) for s in run["steps"]]
    for before, step in zip(run["steps"], steps[1:]):
        period = step["t_s"] - before["t_s"]
        if period > 0:
            step["step_s"] = period
    out = {**run, "steps": steps}
    if run["tokens_per_s"]:
        out["tokens_per_s"] = throughput([record for record, _ in replay_records(out, 1.0)]
                                         ).tokens_per_s
    return out


def median_run(runs: list[dict]) -> dict:
    """The run of median tokens/s (the lower one of an even count; failed runs count 0)."""
    ranked = sorted(runs, key=lambda r: r["tokens_per_s"] or 0.0)
    return ranked[(len(ranked) - 1) // 2]


def charged_wall(run: dict, steps: list[dict], budget_gib: float) -> tuple[float, int | None]:
    """(trial-seconds of a run, index of the step where the memory guard stops it)."""
    for i, s in enumerate(steps):
        if s["peak_rss_gib"] > budget_gib:
            return s["t_s"] + STOP_COST_S, i
    if run["outcome"] != "ok" or not steps:
        return run["wall_s"], None
    from autotune.running.monitor import EXIT_GRACE_S, POLL_S

    # The monitor stops a trial EXIT_GRACE_S after its end event (msrun's teardown).
    return min(run["wall_s"], steps[-1]["t_s"] + EXIT_GRACE_S + POLL_S), None


def replay_records(run: dict, factor: float) -> list:
    """The run's steps as StepRecords, step times scaled by ``factor`` (run-to-run noise)."""
    from trials.contract.events import Phase, StepRecord

    out, shift = [], 0.0
    for s in run["steps"]:
        scaled = s["step_s"] * (factor if s["phase"] != "compile" else 1.0)
        shift += scaled - s["step_s"]
        out.append((StepRecord(step=s["step"], phase=Phase(s["phase"]), loss=s["loss"],
                               grad_norm=1.0, step_s=scaled, data_wait_s=s["data_wait_s"],
                               tokens=s["tokens"], peak_rss_gib=s["peak_rss_gib"]),
                    s["t_s"] + shift))
    return out


def params_of(cfg, space: dict) -> dict:
    """The landscape's knob values of a resolved trial config: each knob of ``space`` read
    back (a config group by its name, an enum by its value, the split as ``DPxMPxPP``)."""
    import dataclasses
    import enum

    from trials.contract.vocabulary import format_split

    out = {}
    for path in space:
        if path == "parallel.split":
            out[path] = format_split(cfg.parallel.dp, cfg.parallel.mp, cfg.parallel.pp)
            continue
        value = cfg
        for part in path.split("."):
            value = getattr(value, part)
        if dataclasses.is_dataclass(value):  # a config group: its name
            value = value.name
        out[path] = value.value if isinstance(value, enum.Enum) else value
    return out


def replay_plan(run: dict, factor: float, budget_gib: float) -> tuple[list, float, int]:
    """A recorded run as a virtual trial's timeline: (events, exit second, exit code). Its
    records appear at their recorded times (scaled by the run's factor); the trial's memory
    guard ends it at the first step over ``budget_gib``."""
    from trials.contract.events import EndRecord, StartRecord, SummaryRecord
    from trials.contract.outcomes import Outcome
    from trials.contract.scorecard import scorecard

    events: list[tuple[float, object]] = [(0.0, StartRecord(
        total_steps=len(run["steps"]), budget_gib=budget_gib))]
    steps = []
    for record, t in replay_records(run, factor):
        steps.append(record)
        events.append((t, record))
        if record.peak_rss_gib > budget_gib:  # the trial's memory guard
            events.append((t, EndRecord(Outcome.OOM,
                                        f"peak RSS over the budget {budget_gib:g} GiB")))
            return events, t + STOP_COST_S, Outcome.OOM.exit_code
    outcome = Outcome.parse(run["outcome"])
    end_t = events[-1][0]  # the last step's time (0 for a run without steps)
    if outcome is Outcome.OK:
        peak = max(s.peak_rss_gib for s in steps)
        events.append((end_t, SummaryRecord(**scorecard(
            steps, flops_per_token=None, peak_flops=None, recompute=False,
            peak_rss_gib=[peak], budget_gib=budget_gib, spike_factor=8.0))))
        wall, _ = charged_wall(run, run["steps"], math.inf)
        exit_s = wall + end_t - (run["steps"][-1]["t_s"] if run["steps"] else 0.0)
    else:
        exit_s = run["wall_s"]
    events.append((end_t, EndRecord(outcome, "" if outcome is Outcome.OK else "as recorded")))
    return events, exit_s, outcome.exit_code


class ReplayRunner:
    """The sweep's runner when every trial is a recorded run of the landscape, played in
    virtual time (autotune.testing.virtual.VirtualTrial): the real loop (sampler, filters,
    follow loop, slow rule, racing, scoring) decides on it. A stop costs STOP_COST_S, as
    the trial's processes take to go."""

    def __init__(self, landscape: Landscape, seed: int, cv: float, budget_gib: float) -> None:
        self.landscape, self.cv, self.budget_gib = landscape, cv, budget_gib
        self.rng = np.random.default_rng(seed)
        self.spent = 0.0

    def start(self, job, placement=None):
        from autotune.testing.virtual import VirtualTrial

        run = self.landscape.grid[key(params_of(job.cfg, self.landscape.space))]
        factor = float(np.exp(self.rng.normal(0.0, self.cv))) if self.cv else 1.0
        events, exit_s, code = replay_plan(run, factor, self.budget_gib)
        return VirtualTrial(job, events, exit_s=exit_s, exit_code=code,
                            stop_cost_s=STOP_COST_S, on_end=self._charge)

    def _charge(self, seconds: float) -> None:
        self.spent += seconds


def sweep_overrides(searcher: str, seed: int, *, base: list[str], budget_gib: float,
                    n_trials: int, runs: Path, extra: tuple[str, ...] = ()) -> list[str]:
    return [*base, *SEARCHERS[searcher], *extra, f"guard.memory_budget_gib={budget_gib}",
            f"sweep.seed={seed}", f"sweep.n_trials={n_trials}", f"sweep.runs_dir={runs}",
            "sweep.study=replay", "sweep.progress=false",
            "sweep.max_failure_rate=1", "profile.after_sweep=false",  # replayed: no process
            # The recorded landscape does not drift: re-measuring the baseline would only
            # add trial-seconds (bench/drift.py, issue 20, is where it is measured).
            "sweep.baseline_every=0",
            # A replayed run's step times are recorded ones: this host's load while it is
            # replayed says nothing about them (a real trial would be flagged contended).
            "sweep.contention_cores=1000"]


def search_once(searcher: str, seed: int, *, landscape: Landscape, budget_gib: float,
                n_trials: int, cv: float, workdir: Path, extra: tuple[str, ...] = ()) -> dict:
    from rich.console import Console

    from autotune.settings import SweepConfig, validate_settings
    from trials.contract.compose import compose

    runs = workdir / f"{searcher}-{seed}"
    overrides = sweep_overrides(searcher, seed, base=landscape.base, budget_gib=budget_gib,
                                n_trials=n_trials, runs=runs, extra=extra)
    from autotune.search.proposals import SEEDED
    from autotune.study import records as R
    from autotune.study import selection
    from autotune.sweep import Sweep
    from autotune.sweep_context import SweepContext

    composed = compose("sweep", overrides, with_choices=True, schema=SweepConfig)
    config = validate_settings(composed)
    runner = ReplayRunner(landscape, seed, cv, budget_gib)
    timeline: list[tuple[float, float | None]] = []  # (trial-seconds, the pick's true value)

    def mark(study) -> None:
        """The trial-seconds so far, and the true value of the sweep's pick now."""
        pick = selection.best(R.load_records(study), budget_gib)
        timeline.append((runner.spent, landscape.true_value(pick.params, budget_gib)
                         if pick is not None else None))

    def observe(study, settled) -> None:
        if settled.launched:
            mark(study)

    # The replayed runs are real measurements: they refit the cost model as a sweep's do.
    context = SweepContext.build(composed, config, overrides, runner=runner, measured=True)
    sweep = Sweep(context, Console(file=io.StringIO()), observe=observe)
    outcome = sweep.run()
    mark(outcome.study)  # the final race, once the budget is spent, may change the pick
    decisions = decisions_of(outcome.study)
    seeded = outcome.study.user_attrs.get(SEEDED)
    shutil.rmtree(runs, ignore_errors=True)
    return {"timeline": timeline, "spent_s": runner.spent, "decisions": decisions,
            "seeded": seeded}


def decisions_of(study) -> list[tuple]:
    """What a sweep decided, trial by trial: (configuration, outcome, tokens/s told)."""
    from autotune.study.records import load_records

    return [(key(r.params), r.reason_text, None if r.tokens_per_s is None
             else round(r.tokens_per_s, 3)) for r in load_records(study)]




_LANDSCAPES: dict[Path, Landscape] = {}


def _search_task(name: str, seed: int, path: Path, budget: float, n_trials: int, cv: float,
                 workdir: Path) -> dict:
    """One replayed sweep in a worker process (the landscape is read once per process)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if path not in _LANDSCAPES:
        _LANDSCAPES[path] = Landscape(path)
    return search_once(name, seed, landscape=_LANDSCAPES[path], budget_gib=budget,
                       n_trials=n_trials, cv=cv, workdir=workdir)


def reach_seconds(timeline: list, target: float) -> float:
    """Trial-seconds until the pick is within the target; inf when the budget ends first."""
    return next((t for t, v in timeline if v is not None and v >= target), math.inf)


def summarise(results: dict[str, list[dict]], optimum: float, grid_s: float) -> list[list]:
    rows = []
    target = (1 - WITHIN) * optimum
    for name, runs in results.items():
        reach = np.array([reach_seconds(r["timeline"], target) for r in runs])
        finite = reach[np.isfinite(reach)]
        end_ok = np.mean([bool(r["timeline"]) and (r["timeline"][-1][1] or 0) >= target
                          for r in runs])
        # No interpolation: a seed that never reached the target counts as inf.
        median = float(np.quantile(reach, 0.5, method="inverted_cdf"))
        p90 = float(np.quantile(reach, 0.9, method="inverted_cdf"))
        rows.append([name, len(runs), median, p90,
                     100 * median / grid_s if math.isfinite(median) else math.inf,
                     float(np.median([r["spent_s"] for r in runs])), 100 * float(end_ok),
                     len(finite)])
    return rows


@dataclass
class Replayed:
    """Every searcher's replayed sweeps on one landscape, and what they are scored against."""

    results: dict[str, list[dict]]
    optimum: float
    params: dict
    grid_s: float
    budget_gib: float
    over: int
    cv: float


def replay_all(path: Path, searchers: list[str], *, seeds: int, n_trials: int, jobs: int,
               budget_gib: float | None = None) -> Replayed:
    """``seeds`` replayed sweeps of each searcher on the landscape at ``path``."""
    os.environ.setdefault("GLOG_v", "3")
    landscape = Landscape(path)
    peaks = [landscape.peak(r) for r in landscape.grid.values() if r["steps"]]
    budget = budget_gib or landscape.budget_gib
    cv = landscape.run_to_run_cv()
    params, optimum = landscape.optimum(budget)
    grid_s = landscape.grid_seconds(budget)
    over = sum(1 for p in peaks if p > budget)
    log(f"{path.name}: {len(landscape.grid)} points, {over} over the {budget:g} GiB budget; "
        f"optimum {optimum:,.0f}/s at {params}; full grid {grid_s:,.0f} trial-s; "
        f"run-to-run CV {100 * cv:.1f} %")
    workdir = Path(tempfile.mkdtemp(prefix="autotune-replay-"))
    # The cost model starts from the profile's priors and this machine's GEMM peak, with no
    # calibration left by other studies on this machine.
    from trials.contract.machine import default_cache_dir

    (workdir / "cache").mkdir()
    peak_file = default_cache_dir() / "peak_flops.json"
    if peak_file.exists():
        shutil.copy(peak_file, workdir / "cache" / "peak_flops.json")
    from trials.contract.machine import cached_cpu_peak_flops

    if cached_cpu_peak_flops("float32", workdir / "cache") is None:
        # Without it the model predicts no step time, so every searcher replays as if
        # the model were off (a run on a fresh host measured `default` as `no-model`).
        log(f"WARNING: no verified GEMM peak for this host in {default_cache_dir()}: the "
            "cost model predicts no step time and seeds nothing; set AUTOTUNE_CACHE to a "
            "cache with one (BENCHMARKS.md, 'Search efficiency')")
    # The workers' cache; the caller's is restored after (a second landscape replayed in
    # the same process, as bench.search_defaults does, would read this deleted one).
    callers_cache = os.environ.get("AUTOTUNE_CACHE")
    os.environ["AUTOTUNE_CACHE"] = str(workdir / "cache")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    results: dict[str, list[dict]] = {}
    tasks = [(name, seed) for name in searchers for seed in range(seeds)]
    try:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {task: pool.submit(_search_task, *task, path, budget, n_trials, cv,
                                         workdir) for task in tasks}
            for name in searchers:
                results[name] = [futures[(name, seed)].result() for seed in range(seeds)]
                log(f"{name}: {seeds} seeds done")
    finally:
        if callers_cache is None:
            os.environ.pop("AUTOTUNE_CACHE", None)
        else:
            os.environ["AUTOTUNE_CACHE"] = callers_cache
        shutil.rmtree(workdir, ignore_errors=True)
    return Replayed(results, optimum, params, grid_s, budget, over, cv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--n-trials", type=int, default=32,
                        help="launch budget of every searcher (default 32, a third of the "
                             "grid)")
    parser.add_argument("--budget-gib", type=float, default=None,
                        help="memory budget per rank (default: the landscape's own)")
    parser.add_argument("--searchers", nargs="*", default=list(COMPARED),
                        choices=list(SEARCHERS))
    parser.add_argument("--landscape", type=Path, default=LANDSCAPE)
    parser.add_argument("--jobs", type=int, default=1,
                        help="replayed sweeps run at once (simulated time: load does not "
                             "change the results)")
    args = parser.parse_args(argv)
    try:  # the landscape loads and its space is found, or one line naming the fix
        Landscape(args.landscape).base
    except (OSError, ValueError, KeyError) as exc:
        parser.exit(2, f"search_efficiency: --landscape {args.landscape}: {exc}\n")
    replayed = replay_all(args.landscape, args.searchers, seeds=args.seeds,
                          n_trials=args.n_trials, jobs=args.jobs, budget_gib=args.budget_gib)
    results, optimum, grid_s = replayed.results, replayed.optimum, replayed.grid_s
    budget, over, cv, params = replayed.budget_gib, replayed.over, replayed.cv, replayed.params
    headers = ["searcher", "seeds", "median s to 3 %", "p90 s to 3 %", "median % of grid",
               "median s spent", "% ending within 3 %", "seeds reaching 3 %"]
    rows = summarise(results, optimum, grid_s)
    print_table(headers, rows)
    by_name = {r[0]: r for r in rows}
    ratios = {}
    if "default" in by_name:
        for other in ("random", "tpe-no-pruning"):
            if other in by_name and by_name["default"][2] > 0:
                ratios[f"{other} / default (median s)"] = by_name[other][2] / by_name["default"][2]
    for label, ratio in ratios.items():
        log(f"{label}: {ratio:.2f}x")
    path = write_result(NAME, {
        "seeds": args.seeds, "n_trials": args.n_trials, "budget_gib": budget,
        "points_over_budget": over, "run_to_run_cv": cv, "optimum": {"params": params,
                                                                     "tokens_per_s": optimum},
        "grid_seconds": grid_s, "headers": headers, "rows": rows, "ratios": ratios,
        "timelines": {k: [r["timeline"] for r in v] for k, v in results.items()},
        "decisions": {k: [r["decisions"] for r in v] for k, v in results.items()},
        "seeded": {k: [r["seeded"] for r in v] for k, v in results.items()}})
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    cli(main)
