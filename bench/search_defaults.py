"""The default searcher's settings, chosen on one landscape and scored on the others.

    .venv/bin/python -m bench.search_defaults --jobs 2          # 50 seeds, every candidate
    .venv/bin/python -m bench.search_defaults --seeds 20 --jobs 2 \
        --candidates startup-3 neighbours no-model slow-0.7          # the run reported
    .venv/bin/python -m bench.search_defaults --seeds 5         # a quick look

A default chosen on the landscape that scores it is in-sample. Here each candidate
(``bench.search_efficiency.CANDIDATES``: today's default, and one change of it each:
startup trials, one-knob neighbours first, the cost model's seeding and its trust gate,
the slow rule's ratio, racing, the final race's finalists) replays ``--seeds`` sweeps of
``--n-trials`` launches on every committed landscape (``bench/data/landscape_*.json.gz``:
the GPT's execution knobs, the data-bound CNN's input pipeline beside mode and precision,
and the default ``gpt_small`` with the memory-optimize level, recorded after the defaults
were chosen on the first two), beside TPE without pruning.

A candidate's score on a landscape: the share of seeds whose pick at the end of the budget
is within 3 % of the optimum, then (ties) the median trial-seconds to get there as a share
of the whole grid's. The candidate chosen on each landscape is then read on the others: a
setting that wins only where it was chosen is not a default. Prints one table (every
candidate on every landscape, and which landscape chose it) and writes
``runs/bench/search_defaults.json``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from bench._common import REPO, cli, log, print_table, write_result
from bench.search_efficiency import CANDIDATES, replay_all, summarise

NAME = "search_defaults"
LANDSCAPES = sorted((REPO / "bench" / "data").glob("landscape_*.json.gz"))
#: The reference a default must beat by 2x (issue 35): TPE with the slow rule off.
REFERENCE = "tpe-no-pruning"


def score(row: list) -> tuple[float, float]:
    """Sort key, best first: more seeds ending within 3 %, then less of the grid to reach it."""
    return (-row[6], row[4])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--n-trials", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--landscapes", type=Path, nargs="*", default=LANDSCAPES)
    parser.add_argument("--candidates", nargs="*", default=list(CANDIDATES),
                        choices=list(CANDIDATES), help="a subset of the candidates")
    args = parser.parse_args(argv)
    candidates = list(dict.fromkeys(["default", *args.candidates]))
    names = [*candidates, REFERENCE]
    rows: dict[str, dict[str, list]] = {}  # landscape -> searcher -> summary row
    for path in args.landscapes:
        replayed = replay_all(path, names, seeds=args.seeds, n_trials=args.n_trials,
                              jobs=args.jobs)
        summary = summarise(replayed.results, replayed.optimum, replayed.grid_s)
        rows[path.name] = {row[0]: row for row in summary}
    chosen = {land: min((by[n] for n in candidates), key=score)[0] for land, by in rows.items()}
    lands = list(rows)
    headers = ["candidate", *(f"{land.split('.')[0]}: % within 3 % / median % of grid"
                              for land in lands), "chosen on"]
    table = []
    for name in names:
        cells = []
        for land in lands:
            row = rows[land][name]
            reach = f"{row[4]:.1f}" if math.isfinite(row[4]) else "never"
            cells.append(f"{row[6]:.0f} / {reach}")
        table.append([name, *cells, ", ".join(land.split(".")[0] for land, c in chosen.items()
                                              if c == name) or "-"])
    print_table(headers, table)
    for land, name in chosen.items():
        others = [other for other in lands if other != land]
        for other in others:
            row = rows[other][name]
            log(f"chosen on {land}: {name}; on {other} it ends within 3 % in {row[6]:.0f} % "
                f"of seeds, at {row[4]:.1f} % of the grid (median)")
    speedups = {land: (by[REFERENCE][2] / by["default"][2]
                       if by["default"][2] > 0 and math.isfinite(by["default"][2]) else None)
                for land, by in rows.items()}
    for land, ratio in speedups.items():
        log(f"{land}: {REFERENCE} / default, median seconds to 3 %: "
            + ("n/a" if ratio is None else f"{ratio:.2f}x"))
    path = write_result(NAME, {"seeds": args.seeds, "n_trials": args.n_trials,
                               "landscapes": lands,
                               "candidates": {n: CANDIDATES[n] for n in candidates},
                               "rows": rows, "chosen": chosen, "speedups": speedups})
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    cli(main)
