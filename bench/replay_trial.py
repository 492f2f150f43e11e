"""A trial program that replays a recorded run of the landscape instead of training.

    python -m autotune sweep search=landscape_cpu workload.n_layers=2 workload.seq_len=64 \
        data=synthetic 'sweep.trial_command=[python,-m,bench.replay_trial]'

It reads the trial's resolved config, finds the recorded run of that configuration in
``bench/data/landscape_cpu.json.gz`` and writes its metrics file as the trial did:
the start event, each step (stopping with ``oom`` at the step whose peak RSS passes the
memory budget, as the trial's guard does), the summary and the end event. The real
sweep loop, monitor and scoring then decide on it; ``tests/search/test_search_replay.py``
checks that ``bench.search_efficiency``'s in-process replay makes the same decisions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.search_efficiency import LANDSCAPE, Landscape, key, params_of, replay_records
from trials.contract.compose import load_resolved
from trials.contract.events import EndRecord, StartRecord, SummaryRecord
from trials.contract.metrics import MetricsLog
from trials.contract.outcomes import Outcome
from trials.contract.schema import memory_budget_gib, to_trial_config
from trials.contract.scorecard import scorecard

#: Seconds between steps, and before the end, so that the monitor judges each step
#: while the process still runs (as it does a real trial's).
PACE_S = 0.01
HOLD_S = 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--landscape", type=Path, default=LANDSCAPE)
    args, overrides = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    cfg = to_trial_config(load_resolved(args.config, overrides))
    landscape = Landscape(args.landscape)
    run = landscape.grid[key(params_of(cfg, landscape.space))]
    budget = memory_budget_gib(cfg)
    metrics = MetricsLog(Path(cfg.run.metrics_path))
    metrics.emit(StartRecord(total_steps=len(run["steps"]), budget_gib=budget))
    steps = []
    for record, _ in replay_records(run, 1.0):
        steps.append(record)
        metrics.emit(record)
        time.sleep(PACE_S)
        if record.peak_rss_gib > budget:
            time.sleep(HOLD_S)
            metrics.emit(EndRecord(Outcome.OOM, f"peak RSS over the budget {budget:g} GiB"))
            return Outcome.OOM.exit_code
    time.sleep(HOLD_S)
    outcome = Outcome.parse(run["outcome"])
    if outcome is Outcome.OK:
        peak = max(s.peak_rss_gib for s in steps)
        metrics.emit(SummaryRecord(**scorecard(
            steps, flops_per_token=None, peak_flops=None, recompute=False, peak_rss_gib=[peak],
            budget_gib=budget, spike_factor=8.0)))
    metrics.emit(EndRecord(outcome, "" if outcome is Outcome.OK else "as recorded"))
    return outcome.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
