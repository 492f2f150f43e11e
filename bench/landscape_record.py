"""Record a landscape once: every configuration of a search space, really run, step by step.

The search-efficiency benchmark (``bench.search_efficiency --landscape FILE``) replays
searches against such a file instead of running MindSpore again, so that 50 seeds of
several searchers cost minutes, not days. Any space of ``conf/search/`` on any workload
(a built-in one or yours through ``workload.entry``) can be recorded; the file keeps the
space, the fixed overrides and the machine, so a replay composes the same trials. Two are
committed (``bench/data/``, and their spaces in ``conf/search/``):

- ``landscape_cpu`` (the default): the default GPT cut to 2 layers of 64 tokens on
  synthetic data, 96 points of mode, precision, micro-batches, threads, recompute and the
  split, whose optimum is not MindSpore's default (PyNative, fp32, one device);
- ``landscape_data``: the data-bound ``image_cnn`` (Python augmentation per sample), its
  data knobs (workers, multiprocessing, prefetch) beside mode, precision and
  micro-batches: a landscape of another kind, where the input pipeline decides;
- ``landscape_small``: the default ``gpt_small`` (twice the layers and tokens of
  landscape_cpu's GPT) with the memory-optimize level among mode, precision, micro-batches
  and recompute, 32 points: kept apart, recorded after the search's defaults were chosen
  on the other two, to score them on.

The replay applies a memory budget that turns part of a landscape into OOM (each step's
peak memory is kept, so the replay stops a trial at the step the memory guard would).

Each point runs once as a fresh ``python -m trials.train`` (msrun for dp=2), in a
seeded random order so that drift of this shared machine is not confounded with
a knob. ``--repeats K`` re-runs K points (the same ones for every K) twice more at
the end, which gives the run-to-run noise the replay draws from; ``--repeats`` the whole
space gives every point 3 runs, whose median run the replay takes as the point's (the
data landscape is recorded so). Nothing prunes: every point is measured in full, with no
memory budget (16 GiB).

    .venv/bin/python -m bench.landscape_record                # 96 points + 8 x 2 repeats
    .venv/bin/python -m bench.landscape_record --space landscape_data \
        --fixed workload=image_cnn guard.memory_budget_gib=16 \
        --out bench/data/landscape_data.json.gz --repeats 64
    .venv/bin/python -m bench.landscape_record --space landscape_small \
        --fixed data=synthetic guard.memory_budget_gib=16 \
        --out bench/data/landscape_small.json.gz --repeats 6 --rerecord-above 0.5
    .venv/bin/python -m bench.landscape_record --limit 4      # a smoke run

Writes ``--out`` (partial progress in ``runs/bench/landscape_<space>_partial.jsonl``; an
interrupted recording resumes where it stopped).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import random
from pathlib import Path

import yaml

from bench._common import REPO, RESULTS_DIR, cli, log, machine_info, run_trial
from trials.contract.schema import CONF_DIR

#: The space recorded by default (conf/search/landscape_cpu.yaml).
SPACE_NAME = "landscape_cpu"
#: Its fixed overrides: the default sweep's GPT cut to 2 layers of 64 tokens on synthetic
#: data (as in bench.trial_rank_correlation), so that the slowest points (PyNative, dp=2,
#: recompute) stay near a minute; the memory guard is out of the way.
FIXED = ["workload.n_layers=2", "workload.seq_len=64", "data=synthetic",
         "guard.memory_budget_gib=16"]
OUT = REPO / "bench" / "data" / "landscape_cpu.json.gz"


def search_config(name: str) -> dict:
    """conf/search/NAME.yaml (the one source of a recorded space: its knobs and baseline);
    the landscape file carries a copy, so that it replays where that file is absent."""
    return yaml.safe_load((REPO / "conf" / "search" / f"{name}.yaml").read_text())


def space_of(name: str) -> dict[str, list]:
    """knob -> values of conf/search/NAME.yaml."""
    return search_config(name)["knobs"]


def points(space: dict[str, list]) -> list[dict]:
    keys = list(space)
    return [dict(zip(keys, values)) for values in itertools.product(*space.values())]


def overrides(point: dict, space: dict[str, list], fixed: list[str]) -> list[str]:
    """The trial program's overrides of a point, as the sweep's search space writes them."""
    from autotune.search.space import Knob

    out = list(fixed)
    for path, value in point.items():
        is_group = (CONF_DIR / path).is_dir()  # a config group, as the sweep's space
        out += Knob(path, tuple(space[path]), is_group=is_group).overrides(value)
    return out


def devices(point: dict) -> int:
    dp, mp, pp = (int(x) for x in point.get("parallel.split", "1x1x1").split("x"))
    return dp * mp * pp


def compact(run, started_at: float) -> dict:
    """What the replay needs of one run: outcome, wall time, and each step's timing."""
    steps = [{"step": s["step"], "phase": s["phase"], "step_s": s["step_s"],
              "data_wait_s": s["data_wait_s"], "peak_rss_gib": s["peak_rss_gib"],
              "loss": s["loss"], "tokens": s["tokens"],
              "t_s": round(s["time"] - started_at, 3)} for s in run.steps]
    return {"outcome": run.outcome or ("crash" if run.rc else None), "rc": run.rc,
            "wall_s": round(run.wall_s, 3), "tokens_per_s": run.perf.tokens_per_s,
            "steps": steps, "foreign_cores": round(run.load.get("foreign_cores", 0.0), 3)}


#: How a landscape's replay budget is chosen: one that rules part of it out, as a user's
#: memory budget does (landscape_cpu's 0.62 GiB rules out 36 of its 96 points).
BUDGET_RULE = "the 65th percentile of the completed grid points' peaks: about a third over it"


def replay_budget(runs: list[dict]) -> float:
    import numpy as np

    peaks = [max(s["peak_rss_gib"] for s in r["steps"]) for r in runs
             if r["kind"] == "grid" and r["outcome"] == "ok" and r["steps"]]
    return round(float(np.quantile(peaks, 0.65)), 2) if peaks else 16.0


def record_one(point: dict, *, kind: str, space: dict, fixed: list[str], partial: Path) -> dict:
    run = run_trial(overrides(point, space, fixed), world_size=devices(point), timeout_s=600)
    entry = {"params": point, "kind": kind, **compact(run, run.started_at)}
    with partial.open("a") as fh:
        fh.write(json.dumps(entry) + "\n")
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=8, metavar="K",
                        help="points re-run twice more for the run-to-run noise (default 8)")
    parser.add_argument("--limit", type=int, default=None, help="record only N points")
    parser.add_argument("--space", default=SPACE_NAME,
                        help="a search space of conf/search/ (default landscape_cpu)")
    parser.add_argument("--fixed", nargs="*", default=None, metavar="OVERRIDE",
                        help="overrides every point runs with (default: landscape_cpu's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the landscape file (default bench/data/<space>.json.gz)")
    parser.add_argument("--rerecord-above", type=float, default=None, metavar="CORES",
                        help="afterwards, run again every grid point during which other "
                             "jobs used more than CORES cores (its run is replaced)")
    args = parser.parse_args(argv)
    space = space_of(args.space)
    fixed = FIXED if args.fixed is None else args.fixed
    out = args.out or REPO / "bench" / "data" / f"{args.space}.json.gz"
    partial = RESULTS_DIR / f"landscape_{args.space}_partial.jsonl"
    record = functools.partial(record_one, space=space, fixed=fixed, partial=partial)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    done = []
    if partial.exists():
        done = [json.loads(line) for line in partial.read_text().splitlines() if line.strip()]
        log(f"resuming: {len(done)} run(s) already recorded in {partial}")
    order = points(space)
    random.Random(args.seed).shuffle(order)
    order = order[:args.limit] if args.limit else order
    repeat_points = order[:args.repeats]
    plan = [(p, "grid") for p in order] + [(p, "repeat") for p in repeat_points] * 2
    for i, (point, kind) in enumerate(plan):
        already = sum(1 for e in done if e["params"] == point and e["kind"] == kind)
        wanted = sum(1 for p, k in plan[:i + 1] if p == point and k == kind)
        if already >= wanted:
            continue
        entry = record(point, kind=kind)
        done.append(entry)
        log(f"{i + 1}/{len(plan)} {kind} {point}: {entry['outcome']} "
            f"{entry['tokens_per_s'] or 0:,.0f}/s in {entry['wall_s']:.1f} s")
    if args.rerecord_above is not None:
        busy = [e for e in done if e["kind"] == "grid"
                and e.get("foreign_cores", 0) > args.rerecord_above]
        log(f"re-recording {len(busy)} point(s) run while other jobs used more than "
            f"{args.rerecord_above:g} cores")
        for entry in busy:
            fresh = record(entry["params"], kind="grid")
            done[done.index(entry)] = fresh
            log(f"{entry['params']}: {entry['tokens_per_s'] or 0:,.0f} -> "
                f"{fresh['tokens_per_s'] or 0:,.0f}/s")
        partial.write_text("".join(json.dumps(e) + "\n" for e in done))
    payload = {"search": args.space, "search_config": search_config(args.space),
               "space": space, "fixed": fixed,
               "budget_gib": replay_budget(done), "budget_note": BUDGET_RULE,
               "machine": machine_info(), "runs": done}
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt") as fh:
        json.dump(payload, fh, separators=(",", ":"))
    log(f"wrote {out} ({len(done)} runs)")
    return 0


if __name__ == "__main__":
    cli(main)
