"""Record a landscape once: every configuration of a CPU space, really run, step by step.

The search-efficiency benchmark (``bench.search_efficiency``) replays searches
against this file instead of running MindSpore again, so that 50 seeds of five
searchers cost minutes, not days. The space (``SPACE``, 96 points) is one where
search matters: its optimum is not MindSpore's default (PyNative, fp32, one
device), and the replay applies a memory budget that turns part of it into OOM
(each step's peak RSS is kept, so the replay stops a trial at the step the memory
guard would).

Each point runs once as a fresh ``python -m trials.train`` (msrun for dp=2), in a
seeded random order so that drift of this shared machine is not confounded with
a knob. ``--repeats K`` re-runs K points (the same ones for every K) twice more at
the end, which gives the run-to-run noise the replay draws from. Nothing prunes:
every point is measured in full, with no memory budget (16 GiB).

    .venv/bin/python -m bench.landscape_record                # 96 points + 8 x 2 repeats
    .venv/bin/python -m bench.landscape_record --limit 4      # a smoke run

Writes ``bench/data/landscape_cpu.json.gz`` (partial progress in ``runs/bench/``;
an interrupted recording resumes where it stopped).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
from pathlib import Path

import yaml

from bench._common import REPO, RESULTS_DIR, log, machine_info, run_trial

#: The recorded space: knob -> values, in the override syntax of the trial program
#: (conf/search/landscape_cpu.yaml, the one source of it).
SPACE: dict[str, list] = yaml.safe_load(
    (REPO / "conf" / "search" / "landscape_cpu.yaml").read_text())["knobs"]
#: The default sweep's GPT cut to 2 layers of 64 tokens on synthetic data (as in
#: bench.trial_rank_correlation), so that the slowest points (PyNative, dp=2, recompute)
#: stay near a minute; the memory guard is out of the way.
FIXED = ["workload.n_layers=2", "workload.seq_len=64", "data=synthetic",
         "guard.memory_budget_gib=16"]
OUT = REPO / "bench" / "data" / "landscape_cpu.json.gz"
PARTIAL = RESULTS_DIR / "landscape_partial.jsonl"


def points() -> list[dict]:
    keys = list(SPACE)
    return [dict(zip(keys, values)) for values in itertools.product(*SPACE.values())]


def overrides(point: dict) -> list[str]:
    """The trial program's overrides of a point, as the sweep's search space writes them."""
    from autotune.search.space import Knob

    out = list(FIXED)
    for path, value in point.items():
        out += Knob(path, tuple(SPACE[path]), is_group=path == "precision").overrides(value)
    return out


def devices(point: dict) -> int:
    dp, mp, pp = (int(x) for x in point["parallel.split"].split("x"))
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


def record_one(point: dict, *, kind: str) -> dict:
    run = run_trial(overrides(point), world_size=devices(point), timeout_s=600)
    entry = {"params": point, "kind": kind, **compact(run, run.started_at)}
    with PARTIAL.open("a") as fh:
        fh.write(json.dumps(entry) + "\n")
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=8, metavar="K",
                        help="points re-run twice more for the run-to-run noise (default 8)")
    parser.add_argument("--limit", type=int, default=None, help="record only N points")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--rerecord-above", type=float, default=None, metavar="CORES",
                        help="afterwards, run again every grid point during which other "
                             "jobs used more than CORES cores (its run is replaced)")
    args = parser.parse_args(argv)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    done = []
    if PARTIAL.exists():
        done = [json.loads(line) for line in PARTIAL.read_text().splitlines() if line.strip()]
        log(f"resuming: {len(done)} run(s) already recorded in {PARTIAL}")
    order = points()
    random.Random(args.seed).shuffle(order)
    order = order[:args.limit] if args.limit else order
    repeat_points = order[:args.repeats]
    plan = [(p, "grid") for p in order] + [(p, "repeat") for p in repeat_points] * 2
    for i, (point, kind) in enumerate(plan):
        already = sum(1 for e in done if e["params"] == point and e["kind"] == kind)
        wanted = sum(1 for p, k in plan[:i + 1] if p == point and k == kind)
        if already >= wanted:
            continue
        entry = record_one(point, kind=kind)
        done.append(entry)
        log(f"{i + 1}/{len(plan)} {kind} {point}: {entry['outcome']} "
            f"{entry['tokens_per_s'] or 0:,.0f} tok/s in {entry['wall_s']:.1f} s")
    if args.rerecord_above is not None:
        busy = [e for e in done if e["kind"] == "grid"
                and e.get("foreign_cores", 0) > args.rerecord_above]
        log(f"re-recording {len(busy)} point(s) run while other jobs used more than "
            f"{args.rerecord_above:g} cores")
        for entry in busy:
            fresh = record_one(entry["params"], kind="grid")
            done[done.index(entry)] = fresh
            log(f"{entry['params']}: {entry['tokens_per_s'] or 0:,.0f} -> "
                f"{fresh['tokens_per_s'] or 0:,.0f} tok/s")
        PARTIAL.write_text("".join(json.dumps(e) + "\n" for e in done))
    payload = {"space": SPACE, "fixed": FIXED, "machine": machine_info(), "runs": done}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as fh:
        json.dump(payload, fh, separators=(",", ":"))
    log(f"wrote {args.out} ({len(done)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
