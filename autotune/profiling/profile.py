"""One profile run: a configuration re-run with profiled steps after its measurement
(trials/profiling.py), its diagnosis (autotune/profiling/rules.py), figure, storage
on the study (``autotune.profile``) and printout. ``python -m autotune profile``
(autotune/commands/profile.py) and the sweep's profile of its winner
(autotune/profiling/winner.py) both run it."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import optuna
from rich.console import Console
from rich.table import Table

from autotune.presentation.findings import Finding
from autotune.presentation.invocation import autotune_command
from autotune.presentation.labels import mib_text
from autotune.profiling import rules
from autotune.running.job import Runner
from autotune.running.repeat import run_once
from autotune.settings import SweepSettings
from autotune.study.conditions import load_flag
from autotune.study.schema.keys import PROFILES
from autotune.study.schema.profile import (
    Interconnect,
    ProfileResult,
    store_profile,
    stored_profiles,  # noqa: F401  (the report, dashboard and winner read it here)
)
from trials.contract.events import ProfileRecord
from trials.contract.knob_reach import Reach
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance
from trials.contract.schema import ConfigError, TrialConfig, knob_values
from trials.contract.trial_dir import TrialDir

#: How a profile run differs from the trial. No compile cache: a graph loaded from it has
#: lost its scope names (Default/MatMul-op3), which tell forward from backward and
#: optimizer. Fixed warm-up and measured steps (the floors): the unprofiled steps are only
#: the reference for the profiler's overhead, and adaptive measuring could run 4x longer.
PROFILE_RUN = ("run.compile_cache=false", "run.adaptive=false")
#: Study attribute holding profiles, keyed by trial number (as a string).
PROFILE_STUDY_KEY = PROFILES






def profile_config(runner: Runner, cfg: TrialConfig, out: Path, settings: SweepSettings,
                   steps: int, *, console: Console | None = None, trial: int | None = None,
                   label: str | None = None) -> ProfileResult | None:
    """Run ``cfg`` with ``steps`` profiled steps in ``out`` through ``runner``; the stored
    result, or None (with the reason printed) when the run failed. ``label`` names what
    was profiled in the figure's title (default: ``trial N``)."""
    run_dir = TrialDir(out)
    run_dir.write_config(cfg)
    if console is not None:
        console.print(f"profiling {steps} steps after warm-up and measurement in {out} ...",
                      markup=False, soft_wrap=True)
    run = run_once(runner, run_dir, settings, name="profile", overrides=PROFILE_RUN + (
        f"run.profile_steps={steps}", "run.profile_dir=.", "run.metrics_path=metrics.jsonl"))
    if run.reason is not Outcome.OK or run.profile is None:
        if console is not None:
            why = run.detail or ("no profile event" if run.reason is Outcome.OK else "")
            console.print(f"profile failed: {run.reason.value}: {why}\n{run.log_tail}",
                          markup=False, soft_wrap=True)
        return None
    profile = run.profile
    perf = run.summary.perf if run.summary else Performance()
    evidence = rules.from_profile(profile, perf, trial=trial, dp=cfg.parallel.dp,
                                  settings=knob_values(cfg), reach=workload_reach(cfg))
    findings = rules.diagnose(evidence)
    label = label or (f"trial {trial}" if trial is not None else "the composed configuration")
    # matplotlib on first use: every command imports this module, few draw.
    from autotune.profiling.figure import where_the_time_goes

    where_the_time_goes(profile, out / "profile.png",
                        title=f"Where the time goes: {label}, {profile.steps} profiled steps")
    conditions = (run.conditions.judge(settings.contention_cores)
                  if run.conditions is not None else None)
    return ProfileResult(trial=trial, dir=str(out), wall_s=run.wall_s, profile=profile,
                         performance=perf.replace(step_times_s=()),
                         interconnect=interconnect(perf, cfg, Path(settings.runs_dir)),
                         findings=[asdict(f) for f in findings],
                         figure=str(out / "profile.png"), label=label,
                         conditions=conditions)


def workload_reach(cfg: TrialConfig) -> Reach | None:
    """What the profiled workload applies (its advice names no knob it refuses); None
    where that cannot be told (the check's import failed: the profile ran all the same)."""
    from autotune.running.preflight import check_workload_entry

    try:
        return check_workload_entry(cfg.workload.entry, workload=cfg.workload)
    except ConfigError:
        return None


def write_result(result: ProfileResult) -> None:
    """``profile.json`` beside the profile, once its caller has added what it knows."""
    (Path(result.dir) / "profile.json").write_text(
        json.dumps(result.to_json(), indent=1, default=str) + "\n")


def interconnect(perf: Performance, cfg: TrialConfig, runs_dir: Path) -> Interconnect | None:
    """The trial's gradient all-reduce against what commbench measured at that message size
    on this hardware profile (bus bandwidth, as nccl-tests defines it), where both exist."""
    from autotune.running.commbench import bandwidth_at, load_commbench

    nbytes, comm_s = perf.allreduce_bytes, perf.comm_s
    bench = load_commbench(runs_dir, cfg.hardware.name)
    if not nbytes or not comm_s or bench is None:
        return None
    ranks = max(2, cfg.parallel.dp)
    trial_bus = nbytes / comm_s / 1e9 * 2 * (ranks - 1) / ranks
    bench_bus = bandwidth_at(bench, nbytes)
    return Interconnect(trial_busbw_gbs=trial_bus, commbench_busbw_gbs=bench_bus,
                        fraction=trial_bus / bench_bus if bench_bus else None,
                        commbench_ranks=bench.get("ranks"), commbench_date=bench.get("date"))


def store(study: optuna.Study, trial: int, result: ProfileResult) -> None:
    """Keep the profile on the study (what the report reads back)."""
    store_profile(study, trial, result)


def findings_of(result: ProfileResult) -> list[Finding]:
    found = [Finding(**f) for f in result.findings]
    return [replace(f, trials=tuple(f.trials)) for f in found]  # a JSON list, as a tuple


def overhead_text(profile: ProfileRecord | dict) -> str:
    """The profiler's overhead: the loop's period of the profiled steps against the
    measured ones of the same run (of a profile event, or its JSON), both quoted. A
    profiled step cannot be faster for being profiled: a negative figure is the run's own
    noise."""
    if isinstance(profile, dict):
        profile = ProfileRecord.from_json(profile)
    pct = 100 * (profile.overhead - 1)
    periods = (f"the loop's period {1e3 * profile.overhead * profile.unprofiled_step_s:.2f} "
               f"ms profiled against {1e3 * profile.unprofiled_step_s:.2f} ms unprofiled")
    if pct < 0:
        return (f"profiler overhead {pct:+.1f} %, {periods}: below zero, so within the "
                "step-time noise; the profiler's cost did not show")
    return f"profiler overhead {pct:+.1f} %, {periods}"


def load_note(result: ProfileResult) -> str | None:
    """What a profile measured under other processes' load says before its times (the
    command's printout and the report's section); None for a quiet or unjudged run."""
    c = result.conditions
    if c is None or not c.contended:
        return None
    return (f"measured under load ({load_flag(c)}: {c.text()}; above sweep.contention_cores="
            f"{c.contention_cores:g}): every time here is slower than this machine's quiet "
            "one; profile again when the host is quiet")


def show(result: ProfileResult, console: Console) -> None:
    """The step split and the top operators as tables, then the findings and the files."""
    p = result.profile
    console.print(f"Where the time goes ({result.label or 'profile'}): {p.steps} "
                  f"profiled steps, {1e3 * p.step_s:.2f} ms a step (the loop's period) "
                  f"({overhead_text(p)})",
                  markup=False, soft_wrap=True)
    if note := load_note(result):
        console.print(note, markup=False, soft_wrap=True)
    split = Table()
    split.add_column("part")
    split.add_column("ms/step", justify="right")
    split.add_column("share", justify="right")
    for cat, share in p.shares.items():
        split.add_row(cat, f"{1e3 * p.seconds[cat]:.2f}", f"{100 * share:.1f} %")
    console.print(split)
    ops = Table(title="Top operators by time", title_justify="left")
    for col in ("op", "part", "calls/step", "ms/step", "share"):
        ops.add_column(col, justify="left" if col in ("op", "part") else "right")
    for r in p.top_ops:
        ops.add_row(r.type, r.category, f"{r.calls_per_step:.0f}",
                    f"{r.ms_per_step:.3f}", f"{100 * r.share:.1f} %")
    console.print(ops)
    m = p.memory
    if m.peak_mib is not None:
        console.print(f"memory ({m.source}): peak {mib_text(m.peak_mib)}, mean "
                      f"{mib_text(m.mean_mib)}, peak/mean {m.peak_over_mean:.2f}",
                      markup=False, soft_wrap=True)
        rss = m.rss
        if rss.peak_mib and m.source != "host RSS":
            console.print(f"host RSS (sampled every 2 ms): peak {mib_text(rss.peak_mib)}, "
                          f"mean {mib_text(rss.mean_mib)}", markup=False, soft_wrap=True)
    c = p.communication or {}
    perf = result.performance
    if perf.comm_s is not None:
        console.print(f"gradient all-reduce: {1e3 * perf.comm_s:.2f} ms a step "
                      f"({100 * (perf.comm_share or 0):.1f} % of the step, "
                      f"{(perf.allreduce_bytes or 0) / 2**20:.2f} MiB at "
                      f"{perf.comm_algbw_gbs or 0:.2f} GB/s); in the profile "
                      f"{1e3 * c.get('exposed_s', 0):.2f} ms exposed, "
                      f"{1e3 * c.get('overlapped_s', 0):.2f} ms overlapped", markup=False,
                      soft_wrap=True)
        link = result.interconnect
        if link is not None and link.fraction is not None:
            console.print(f"  bus bandwidth {link.trial_busbw_gbs:.3f} GB/s = "
                          f"{100 * link.fraction:.0f} % of what commbench measured at this "
                          f"size ({link.commbench_busbw_gbs:.3f} GB/s)", markup=False,
                          soft_wrap=True)
        else:
            console.print(f"  (run {autotune_command('commbench')} to judge it against what the "
                          "interconnect can do)", markup=False, soft_wrap=True)
    for f in findings_of(result) or [Finding("none", (), "No rule fired: nothing stands out.")]:
        console.print(f"- {f.rule}: {f.sentence}", markup=False, soft_wrap=True)
    out = Path(result.dir)
    console.print(f"files: {out / 'profile.png'}, {out / 'trace.json'} (Perfetto, "
                  f"chrome://tracing), {out / 'raw'} (MindStudio Insight)", markup=False,
                  soft_wrap=True)
