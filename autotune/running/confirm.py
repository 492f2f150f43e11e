"""``python -m autotune confirm``: re-measure the finalists against measurement noise.

The top-k distinct configurations run ``repeats`` more times each, interleaved
(A B C A B C ...) so that drift of a noisy machine hits all of them alike. The
medians and spreads are stored on the study (``autotune.confirm``), where
``export`` and ``report`` read them.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.report.leaderboard import params_label
from autotune.running import launcher, monitor
from autotune.settings import ConfirmSettings, SweepSettings
from autotune.study import selection
from autotune.study import storage as S
from autotune.study.records import CONFIRM_STUDY_KEY, TrialRecord, load_records
from trials.contract.compose import load_resolved
from trials.contract.launch import trial_argv
from trials.contract.outcomes import Outcome
from trials.contract.schema import ConfigError, to_trial_config


def spread(values: list[float]) -> dict:
    arr = np.asarray(values, dtype=float)
    return {"tokens_per_s": [float(v) for v in arr], "median": float(np.median(arr)),
            "p10": float(np.percentile(arr, 10)), "p90": float(np.percentile(arr, 90)),
            "min": float(arr.min()), "max": float(arr.max()),
            "cv": float(arr.std() / arr.mean()) if arr.size > 1 and arr.mean() else 0.0}


def separable(a: dict, b: dict) -> bool:
    """Two configurations are told apart when their re-run ranges do not overlap."""
    return a["min"] > b["max"] or b["min"] > a["max"]


def rerun(record: TrialRecord, out_dir: Path, settings: SweepSettings) -> float | None:
    """One more run of a trial's exact config, launched exactly as the sweep launches it;
    tokens/s, or None if it did not finish ok."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = Path(record.trial_dir) / "config.yaml"
    cfg = to_trial_config(load_resolved(config, []))
    argv = trial_argv(config, world_size=cfg.parallel.devices,
                      trial_command=launcher.trial_command(settings.simulate,
                                                           settings.trial_command),
                      log_dir=out_dir / "msrun_log")
    proc = launcher.start(argv, out_dir, marker=f"confirm/{record.number}/{time.time_ns()}")
    # The config's own metrics path, relative to the run directory (as in the sweep).
    result = monitor.watch(proc, out_dir / cfg.run.metrics_path, out_dir, settings.stop)
    if result.reason is not Outcome.OK or result.summary is None:
        return None
    return float(result.summary.performance["tokens_per_s"])


def run_confirm(composed: DictConfig, console: Console) -> int:
    settings: SweepSettings = OmegaConf.to_object(composed.sweep)
    options: ConfirmSettings = OmegaConf.to_object(composed.confirm)
    study = S.load_existing(settings)
    chosen = selection.finalists(load_records(study), options.top_k)
    if not chosen:
        raise ConfigError(f"study {settings.study!r} has no complete trial to confirm: "
                          "run the sweep first")
    base_dir = S.study_dir(settings) / "confirm"
    runs: dict[int, list[float]] = {r.number: [] for r in chosen}
    total = options.repeats * len(chosen)
    for rep in range(options.repeats):
        for r in chosen:
            done = sum(len(v) for v in runs.values()) + 1
            console.print(f"confirm {done}/{total}: trial {r.number} repeat {rep + 1}",
                          highlight=False)
            tps = rerun(r, base_dir / f"trial-{r.number:04d}-run-{rep}", settings)
            if tps is not None:
                runs[r.number].append(tps)
    stored = dict(study.user_attrs.get(CONFIRM_STUDY_KEY) or {})
    summary = {}
    for r in chosen:
        if runs[r.number]:
            summary[r.number] = spread(runs[r.number])
            stored[str(r.number)] = summary[r.number]
    study.set_user_attr(CONFIRM_STUDY_KEY, stored)
    console.print(render(chosen, summary), highlight=False)
    return 0


def render(chosen: list[TrialRecord], summary: dict[int, dict]) -> str:
    lines = [f"{'trial':>5}  {'sweep tok/s':>12}  {'median':>10}  {'min..max':>19}  "
             f"{'CV':>6}  knobs"]
    ranked = sorted(chosen, key=lambda r: -(summary.get(r.number) or {}).get("median", 0))
    for r in ranked:
        s = summary.get(r.number)
        if s is None:
            lines.append(f"{r.number:>5}  {r.tokens_per_s:>12,.0f}  {'failed':>10}")
            continue
        lines.append(f"{r.number:>5}  {r.tokens_per_s:>12,.0f}  {s['median']:>10,.0f}  "
                     f"{s['min']:>9,.0f}..{s['max']:<8,.0f}  {100 * s['cv']:>5.1f}%  "
                     f"{params_label(r.params)}")
    top = [summary[r.number] for r in ranked if r.number in summary][:2]
    if len(top) == 2:
        a, b = ranked[0].number, ranked[1].number
        verdict = ("separable: their re-run ranges do not overlap" if separable(*top) else
                   "NOT separable from noise: their re-run ranges overlap; either is fine")
        lines.append(f"top two (trials {a} and {b}): {verdict}")
    return "\n".join(lines)
