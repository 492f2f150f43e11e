"""``python -m autotune soak``: the chosen configuration run long, killed, resumed, judged.

    python -m autotune soak                          # the export choice, 10 x its steps
    python -m autotune soak soak.trial=3 soak.steps=2000
    python -m autotune soak soak.minutes=30          # a time budget, converted to steps up front
    python -m autotune soak run.inject_leak_mib=2    # fault injection: the leak detector must fire

The trial's own resolved ``config.yaml`` runs in production mode in ``<out>/run``
(metrics, checkpoints every ``soak.checkpoint_every`` steps, logs). Once
``soak.kill_at`` of the steps are done and a checkpoint exists, the whole trial is
killed with SIGKILL, half-way between two checkpoints so that the resumed run replays
some steps, and relaunched with the same command (``run.resume=true``). The resumed
run must replay the killed run's steps after its checkpoint within
``soak.resume_tolerance``; then the stitched run is judged for loss spikes,
overflow and skipped updates, tokens/s drift and host-memory growth
(autotune/study/stability.py). Printed, written to ``<out>/soak.json`` and
``<out>/soak.png``, and stored on the study as ``autotune.soak`` (read by ``tune``
and by :func:`soak_section` for the exported job's README).

Choices worth knowing:

* ``soak.minutes`` is turned into a step count before launch, from the trial's
  measured median step time and its launch overhead (printed): the kill point, the
  checkpoint interval and the analysis need the count up front, and the trainer has no
  graceful stop by time (a clock cut would lose the final checkpoint and summary).
* Overrides of the soak command are not merged into the trial's config, so the soak
  runs exactly the configuration that was measured; the one trial knob passed on is
  ``run.inject_leak_mib`` (when non-zero), the fault injection that tests the detector.
* Exit code 0 whenever the soak ran to its end, findings (a leak, drift, a resume that
  did not match) included: they are data. 1 when the run failed twice, or failed to
  start, or the resumed run made no step.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import optuna
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.export.choose import choose_trial
from autotune.running import launcher
from autotune.running.monitor import log_tail
from autotune.settings import SoakSettings, SweepSettings
from autotune.study import stability
from autotune.study import storage as S
from autotune.study.records import TrialRecord, load_records
from trials.contract.compose import load_resolved
from trials.contract.events import (
    CheckpointRecord,
    EndRecord,
    StartRecord,
    StepRecord,
    SummaryRecord,
)
from trials.contract.launch import trial_argv
from trials.contract.metrics import MetricsReader
from trials.contract.outcomes import Outcome
from trials.contract.schema import ConfigError, TrialConfig, to_trial_config

#: Study attribute with the latest soak's result (tune's stability stage reads it too).
SOAK_KEY = "autotune.soak"
#: How often the run's metrics are read: a tiny model steps every ~30 ms, and the kill
#: should land between two checkpoints.
POLL_S = 0.01
#: Seconds a run may take to exit after its end event before it is stopped.
EXIT_GRACE_S = 2.0
#: What <out> may hold from an earlier soak (anything else: refuse to write there).
OWN_FILES = {"run", "soak.json", "soak.png"}


# -- which trial, how long ------------------------------------------------------------------
def pick_trial(study: optuna.Study, records: list[TrialRecord], composed: DictConfig,
               options: SoakSettings) -> tuple[TrialRecord, str]:
    """The trial to soak and why; ConfigError (nothing written yet) when there is none."""
    done = [r for r in records if r.ok]
    if not done:
        raise ConfigError(f"study {study.study_name!r} has no complete trial to soak: run the "
                          "sweep first")
    if options.trial is None:
        record, why = choose_trial(study, records, OmegaConf.to_object(composed.export),
                                   prior_cv=to_trial_config(composed).hardware.cost.run_to_run_cv)
    else:
        by_number = {r.number: r for r in records}
        record = by_number.get(options.trial)
        if record is None:
            raise ConfigError(f"soak.trial={options.trial}: no such trial in study "
                              f"{study.study_name!r} (0..{len(records) - 1}); pick a completed "
                              f"one, e.g. soak.trial={done[0].number}")
        if record.reused_from is not None:
            record = by_number.get(record.reused_from, record)
        if not record.ok:
            raise ConfigError(f"soak.trial={options.trial}: trial {record.number} ended "
                              f"{record.reason_text}, it has no measured run to soak; pick a "
                              f"completed one, e.g. soak.trial={done[0].number}")
        why = f"trial {options.trial} as requested"
    if record.simulated:
        raise ConfigError(f"trial {record.number} was simulated (sweep.simulate): a soak needs "
                          "a configuration this machine runs; pick another soak.trial=N")
    if not record.trial_dir or not (Path(record.trial_dir) / "config.yaml").exists():
        raise ConfigError(f"trial {record.number} has no config.yaml in its run directory "
                          f"({record.trial_dir}): pick another soak.trial=N")
    return record, why


def trial_steps(record: TrialRecord, cfg: TrialConfig) -> int:
    """Steps the trial itself ran: compile + warm-up + measured (its configured counts
    when its scorecard lacks them)."""
    perf = record.scorecard.get("performance") or {}
    warm, measured = perf.get("warmup_steps_used"), perf.get("measured_steps")
    if isinstance(warm, int) and isinstance(measured, int) and measured > 0:
        return 1 + warm + measured
    return 1 + cfg.run.warmup_steps + cfg.run.measure_steps


def launch_overhead_s(record: TrialRecord, own_steps: int) -> float:
    """Seconds a launch costs besides its steps (imports, build, compile), from the trial."""
    step_s = record.step_time_s or 0.0
    if record.wall_s:
        return max(0.0, record.wall_s - (own_steps - 1) * step_s)
    return record.compile_s or 0.0


@dataclass
class SoakPlan:
    """Everything decided before launch, printed and stored with the result."""

    trial: int
    why: str
    config: Path
    steps: int
    steps_from: str
    checkpoint_every: int
    kill_at: float
    #: Kill once this many steps are done...
    kill_from: int | None
    #: ...and at least this many after the latest checkpoint (what the resume replays).
    replay: int
    #: The first step count that meets both (the planned kill).
    planned_kill: int | None
    overrides: list[str]
    step_s: float | None
    world_size: int
    trial_command: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"trial": self.trial, "chosen_because": self.why, "config": str(self.config),
                "steps": self.steps, "steps_from": self.steps_from,
                "checkpoint_every": self.checkpoint_every, "kill_at": self.kill_at,
                "planned_kill_after_step": (self.planned_kill - 1 if self.planned_kill
                                            else None),
                "overrides": self.overrides,
                "trial_step_s": self.step_s, "world_size": self.world_size}


def planned_kill(steps: int, every: int, kill_from: int, replay: int) -> int | None:
    """The first step count >= kill_from with a checkpoint behind it and ``replay`` steps
    past that checkpoint (checkpoints fall on multiples of ``every``); None if none < steps."""
    for n in range(max(kill_from, every + replay), steps):
        if n % every >= replay:
            return n
    return None


def plan_soak(record: TrialRecord, why: str, cfg: TrialConfig, options: SoakSettings, *,
              run_dir: Path, leak_mib: float, trial_command: list[str]) -> SoakPlan:
    own = trial_steps(record, cfg)
    if options.minutes is not None:
        if not record.step_time_s:
            raise ConfigError(f"trial {record.number} has no measured step time to turn "
                              "soak.minutes into steps: give soak.steps=N instead")
        launches = 2 if options.kill_at > 0 else 1
        budget_s = options.minutes * 60 - launches * launch_overhead_s(record, own)
        steps = max(10, int(budget_s / record.step_time_s))
        steps_from = (f"soak.minutes={options.minutes:g}: {launches} launch(es) of "
                      f"~{launch_overhead_s(record, own):.0f} s + steps of "
                      f"{record.step_time_s:.3g} s (trial {record.number}'s median)")
    elif options.steps is not None:
        steps, steps_from = options.steps, f"soak.steps={options.steps}"
    else:
        steps, steps_from = 10 * own, f"10 x trial {record.number}'s {own} steps"
    every = options.checkpoint_every or max(1, steps // 10)
    kill_from = replay = 0
    kill = None
    if options.kill_at > 0:
        kill_from, replay = math.ceil(options.kill_at * steps), every // 2
        kill = planned_kill(steps, every, kill_from, replay)
        if kill is None:
            raise ConfigError(f"no checkpoint to resume from before the end of {steps} steps "
                              f"(checkpoint every {every}, kill at {options.kill_at:g}): lower "
                              "soak.checkpoint_every or soak.kill_at, or soak.kill_at=0 for "
                              "no kill")
    overrides = ["run.mode=production", f"run.steps={steps}", f"run.checkpoint_every={every}",
                 f"run.checkpoint_dir={run_dir / 'checkpoints'}", "run.resume=true",
                 f"run.metrics_path={run_dir / 'metrics.jsonl'}"]
    if leak_mib:
        overrides.append(f"run.inject_leak_mib={leak_mib:g}")
    return SoakPlan(trial=record.number, why=why, config=Path(record.trial_dir) / "config.yaml",
                    steps=steps, steps_from=steps_from, checkpoint_every=every,
                    kill_at=options.kill_at, kill_from=kill_from if kill else None,
                    replay=replay, planned_kill=kill, overrides=overrides,
                    step_s=record.step_time_s, world_size=cfg.parallel.devices,
                    trial_command=trial_command)


def output_dir(settings: SweepSettings, options: SoakSettings) -> Path:
    """<out>; ConfigError when it holds anything but an earlier soak's files."""
    out = Path(options.out).resolve() if options.out else S.study_dir(settings) / "soak"
    if out.exists() and not out.is_dir():
        raise ConfigError(f"soak.out={out} is a file: choose a directory")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OWN_FILES)
        if foreign:
            raise ConfigError(f"soak.out={out} holds other files ({', '.join(foreign[:3])}): "
                              "choose an empty or new soak.out=DIR")
    return out


# -- one launch -----------------------------------------------------------------------------
@dataclass
class Attempt:
    """One launch of the production run: what its part of the metrics file said."""

    index: int
    start_step: int | None = None
    steps: list[StepRecord] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    summary: bool = False
    end: EndRecord | None = None
    outcome: Outcome | None = None
    detail: str = ""
    killed: bool = False
    #: Steps done and latest checkpoint when the kill was sent.
    kill_done: int | None = None
    kill_checkpoint: int | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    first_step_s: float | None = None
    log_tail: str = ""

    @property
    def done(self) -> int:
        """Steps done in all (the last step's number + 1; its start step before any)."""
        if self.steps:
            return self.steps[-1].step + 1
        return self.start_step or 0

    def take(self, record, started: float) -> StepRecord | None:
        if isinstance(record, StartRecord):
            self.start_step = record.start_step
        elif isinstance(record, StepRecord):
            if self.first_step_s is None:
                self.first_step_s = time.time() - started
            self.steps.append(record)
            return record
        elif isinstance(record, CheckpointRecord):
            self.checkpoints.append(record.step)
        elif isinstance(record, SummaryRecord):
            self.summary = True
        elif isinstance(record, EndRecord):
            self.end = record
        return None

    def to_dict(self) -> dict:
        return {"index": self.index, "start_step": self.start_step,
                "first_step": self.steps[0].step if self.steps else None,
                "last_step": self.steps[-1].step if self.steps else None,
                "steps": len(self.steps), "checkpoints": self.checkpoints,
                "outcome": self.outcome.value if self.outcome else None,
                "detail": self.detail, "killed": self.killed, "kill_done": self.kill_done,
                "kill_checkpoint": self.kill_checkpoint, "exit_code": self.exit_code,
                "wall_s": round(self.wall_s, 2),
                "first_step_s": round(self.first_step_s, 2) if self.first_step_s else None,
                "log_tail": self.log_tail}


@dataclass
class Limits:
    """When the soak stops a run itself: a long run is not a trial, so the sweep's wall
    cap is scaled to the planned steps."""

    compile_s: float
    step_s: float
    wall_s: float

    @classmethod
    def for_plan(cls, plan: SoakPlan, settings: SweepSettings) -> Limits:
        stop = settings.stop
        step_s = plan.step_s or 1.0
        return cls(compile_s=stop.compile_timeout_s,
                   step_s=max(stop.step_timeout_s, 20 * step_s),
                   wall_s=max(stop.wall_timeout_s,
                              stop.compile_timeout_s + 3 * plan.steps * step_s + 60))

    def verdict(self, now: float, started: float, last_step: float | None
                ) -> tuple[Outcome, str] | None:
        if now - started > self.wall_s:
            return Outcome.TIMEOUT, f"ran past the soak's wall-clock cap of {self.wall_s:.0f} s"
        if last_step is None and now - started > self.compile_s:
            return Outcome.HANG, f"no step within the compile budget of {self.compile_s:g} s"
        if last_step is not None and now - last_step > self.step_s:
            return Outcome.HANG, f"no step progress for {self.step_s:g} s"
        return None


def kill9(proc: launcher.TrialProcess) -> None:
    """SIGKILL every process of the run at once, as a crashed node would: its process
    group, then msrun's workers (groups of their own), found by the marker."""
    try:
        os.killpg(proc.pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in launcher.processes_with_marker(proc.marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.popen.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    launcher.kill_marked(proc.marker)


def end_line(path: Path) -> None:
    """A SIGKILLed writer may leave a half-written last line: end it, so the resumed run's
    first record starts a line of its own (the reader skips the torn one)."""
    try:
        with open(path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
    except FileNotFoundError:
        pass


def should_kill(done: int, latest_checkpoint: int | None, plan: SoakPlan) -> bool:
    """Past the kill point, a checkpoint on disk, and at least ``replay`` steps past the
    last checkpoint the trainer writes (it saves right after each multiple of the interval:
    judged by the step count, not by the record, which may trail the save)."""
    return (plan.kill_from is not None and plan.kill_from <= done < plan.steps
            and latest_checkpoint is not None
            and done % plan.checkpoint_every >= plan.replay)


def run_attempt(index: int, plan: SoakPlan, run_dir: Path, reader: MetricsReader,
                limits: Limits, *, kill: bool, checkpoints: list[int],
                on_step: Callable[[Attempt, StepRecord], None]) -> Attempt:
    """Launch the run (resuming from the latest checkpoint) and follow it to its end, or
    kill it with SIGKILL at the planned point when ``kill``."""
    argv = trial_argv(plan.config, world_size=plan.world_size,
                      trial_command=plan.trial_command, log_dir=run_dir / "msrun_log",
                      overrides=plan.overrides)
    proc = launcher.start(argv, run_dir, marker=f"soak/{plan.trial}/{time.time_ns()}")
    attempt = Attempt(index=index)
    last_step: float | None = None
    ended: float | None = None
    try:
        while True:
            exited = proc.poll() is not None  # before reading: what it flushed is read
            now = time.time()
            for record in reader.read_new():
                if attempt.take(record, proc.started) is not None:
                    last_step = now
                    on_step(attempt, attempt.steps[-1])
            latest = max([*checkpoints, *attempt.checkpoints, attempt.start_step or 0]) or None
            if kill and should_kill(attempt.done, latest, plan):
                attempt.killed, attempt.kill_done, attempt.kill_checkpoint = (
                    True, attempt.done, latest)
                kill9(proc)
                break
            if exited:
                break
            stop = limits.verdict(now, proc.started, last_step)
            if stop is not None:
                attempt.outcome, attempt.detail = stop
                launcher.stop(proc)
                break
            if attempt.end is not None:
                ended = ended or now
                if now - ended > EXIT_GRACE_S:  # its outcome is written: do not wait on teardown
                    launcher.stop(proc, 0.3)
                    break
            time.sleep(POLL_S)
    except BaseException:
        launcher.stop(proc)
        raise
    for record in reader.read_new():
        attempt.take(record, proc.started)
    launcher.kill_marked(proc.marker)  # dataset workers or ranks left behind
    end_line(run_dir / "metrics.jsonl")
    attempt.exit_code = proc.poll()
    attempt.wall_s = time.time() - proc.started
    _classify(attempt, plan)
    if not attempt.killed and attempt.outcome is not Outcome.OK:
        attempt.log_tail = log_tail(run_dir)
    return attempt


def _classify(attempt: Attempt, plan: SoakPlan) -> None:
    if attempt.killed:
        attempt.outcome, attempt.detail = None, (f"killed with SIGKILL by the soak after step "
                                                 f"{attempt.done - 1}")
        return
    if attempt.outcome is not None:  # stopped by the soak's own clocks
        return
    if attempt.end is not None:
        attempt.outcome, attempt.detail = attempt.end.outcome, attempt.end.reason
    else:
        attempt.outcome = Outcome.from_exit_code(attempt.exit_code)
        attempt.detail = f"exited with code {attempt.exit_code} without an end event"
    if attempt.outcome is Outcome.OK and attempt.done < plan.steps:
        attempt.outcome = Outcome.CRASH
        attempt.detail = f"ended ok after {attempt.done} of {plan.steps} steps"


# -- the soak -------------------------------------------------------------------------------
class Progress:
    """A line about every 10 % of the steps: step, loss, tokens/s, RSS."""

    def __init__(self, say: Callable[[str], None], steps: int) -> None:
        self.say, self.steps = say, steps
        self.every = max(1, steps // 10)
        self.shown = 0
        self.recent: list[float] = []

    def __call__(self, s: StepRecord) -> None:
        if s.step_s > 0 and s.phase.value != "compile":
            self.recent.append(s.tokens / s.step_s)
        done = s.step + 1
        if done <= self.shown or (done % self.every and done != self.steps):
            return
        self.shown = done
        tps = f"{np.median(self.recent):>9,.0f} tok/s" if self.recent else f"{'-':>9} tok/s"
        self.recent = []
        self.say(f"  step {done:>{len(str(self.steps))}}/{self.steps} "
                 f"{100 * done / self.steps:>3.0f} %  loss {s.loss:.4f}  {tps}  "
                 f"RSS {s.rss_gib:.2f} GiB")


def run_attempts(plan: SoakPlan, run_dir: Path, limits: Limits,
                 say: Callable[[str], None]) -> tuple[list[Attempt], str | None]:
    """Launch, kill, resume until the run ends; (attempts, why it failed or None).

    One unexpected failure (crash, divergence, hang) is resumed from the latest
    checkpoint like the kill; a second one ends the soak, as does a launch that made
    no step (a resume that cannot start)."""
    reader = MetricsReader(run_dir / "metrics.jsonl")
    progress = Progress(say, plan.steps)

    def on_step(attempt: Attempt, s: StepRecord) -> None:
        if attempt.index and len(attempt.steps) == 1:
            say(f"  resumed at step {s.step} (first step {attempt.first_step_s:.1f} s after "
                "launch)")
        progress(s)

    attempts: list[Attempt] = []
    checkpoints: list[int] = []
    failures = 0
    while True:
        kill = plan.kill_from is not None and not any(a.killed for a in attempts)
        attempt = run_attempt(len(attempts), plan, run_dir, reader, limits, kill=kill,
                              checkpoints=checkpoints, on_step=on_step)
        attempts.append(attempt)
        checkpoints.extend(attempt.checkpoints)
        resuming = attempt.index > 0
        if attempt.killed:
            say(f"  kill -9 after step {attempt.kill_done - 1} (latest checkpoint: step "
                f"{attempt.kill_checkpoint}), {attempt.wall_s:.1f} s into the run; "
                "resuming from the latest checkpoint")
            continue
        if attempt.outcome is Outcome.OK:
            return attempts, None
        what = "resumed run" if resuming else "run"
        say(f"  {what} ended {attempt.outcome.value}: {attempt.detail}")
        if not attempt.steps:
            return attempts, (f"the {what} failed to start ({attempt.outcome.value}: "
                              f"{attempt.detail})")
        failures += 1
        if failures >= 2:
            return attempts, f"the run failed twice (last: {attempt.outcome.value})"
        say("  resuming from the latest checkpoint after the failure")


def stitch(attempts: list[Attempt]) -> tuple[list[StepRecord], list[int]]:
    """The run as it counts: each launch's steps up to where the next one resumed; and
    the steps at which a new process took over."""
    steps: list[StepRecord] = []
    restarts = []
    for i, a in enumerate(attempts):
        nxt = next((b for b in attempts[i + 1:] if b.steps), None)
        until = nxt.steps[0].step if nxt is not None else math.inf
        steps.extend(s for s in a.steps if s.step < until)
        if i and a.steps:
            restarts.append(a.steps[0].step)
    return steps, restarts


def kill_and_resume(attempts: list[Attempt], tolerance: float) -> dict | None:
    """The resume check of the killed launch against the launch after it."""
    for i, a in enumerate(attempts):
        if a.killed:
            after = attempts[i + 1] if i + 1 < len(attempts) else None
            check = stability.resume_check(a.steps, after.steps if after else [], tolerance)
            return {**check, "kill_done": a.kill_done, "kill_checkpoint": a.kill_checkpoint,
                    "killed_after_s": round(a.wall_s, 2)}
    return None


def run_soak(composed: DictConfig, console: Console) -> int:
    settings: SweepSettings = OmegaConf.to_object(composed.sweep)
    options: SoakSettings = OmegaConf.to_object(composed.soak)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    study = S.load_existing(settings)
    records = load_records(study)
    record, why = pick_trial(study, records, composed, options)
    out = output_dir(settings, options)
    run_dir = out / "run"
    cfg = to_trial_config(load_resolved(Path(record.trial_dir) / "config.yaml", []))
    plan = plan_soak(record, why, cfg, options, run_dir=run_dir,
                     leak_mib=float(composed.run.inject_leak_mib),
                     trial_command=launcher.trial_command(False, settings.trial_command))
    # Everything is validated: from here on the soak writes.
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    kill_text = (f"kill -9 after step {plan.planned_kill - 1} (>= {plan.kill_at:g} of the "
                 f"steps, {plan.replay} past a checkpoint)" if plan.planned_kill else "no kill")
    say(f"soak: trial {plan.trial} ({why}): {plan.steps} steps ({plan.steps_from}), "
        f"checkpoint every {plan.checkpoint_every}, {kill_text}; in {run_dir}")
    extra = [o for o in plan.overrides if o.startswith("run.inject_leak_mib")]
    if extra:
        say(f"  fault injection: {' '.join(extra)}")
    started = time.time()
    attempts, failed = run_attempts(plan, run_dir, Limits.for_plan(plan, settings), say)
    result = summarise(plan, attempts, failed, options, time.time() - started, out)
    plot(attempts, result, out / "soak.png")
    (out / "soak.json").write_text(json.dumps(result, indent=2) + "\n")
    study.set_user_attr(SOAK_KEY, result)
    say(render(result))
    say(f"wrote {out / 'soak.json'} and {out / 'soak.png'}")
    return result["exit_code"]


# -- the result -----------------------------------------------------------------------------
def _clean(value):
    """JSON-safe (the study attribute and soak.json): non-finite floats become None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _clean(value.item())
    return value


def summarise(plan: SoakPlan, attempts: list[Attempt], failed: str | None,
              options: SoakSettings, wall_s: float, out: Path) -> dict:
    steps, restarts = stitch(attempts)
    tokens = next((s.tokens for s in steps if s.tokens), None)
    analysis = stability.analyse(steps, spike_factor=stability.SPIKE_FACTOR,
                                 leak_mib_per_100_steps=options.leak_mib_per_100_steps,
                                 tokens_per_step=tokens, restarts=restarts)
    resume = kill_and_resume(attempts, options.resume_tolerance)
    finished = failed is None
    verdicts = []
    if plan.planned_kill is not None and resume is None:
        verdicts.append("kill: the run ended before the kill point; nothing was resumed")
    if resume is not None:
        verdicts.append(resume["verdict"])
    verdicts.extend(analysis["verdicts"])
    verdicts.append(f"finished: {len(steps)} of {plan.steps} steps in {len(attempts)} "
                    f"launch(es), {wall_s:.1f} s" if finished else f"FAILED: {failed}")
    replayed = sum(len(a.steps) for a in attempts) - len(steps)
    return _clean({
        **plan.to_dict(), "out": str(out), "plot": str(out / "soak.png"),
        "metrics": str(out / "run" / "metrics.jsonl"),
        "finished": finished, "failure": failed, "exit_code": 0 if finished else 1,
        "wall_s": round(wall_s, 2), "steps_trained": len(steps), "steps_replayed": replayed,
        "kill": ({"after_step": resume["kill_done"] - 1, "checkpoint_step":
                  resume["kill_checkpoint"], "after_s": resume["killed_after_s"]}
                 if resume else None),
        "resume": resume, "analysis": {k: v for k, v in analysis.items() if k != "verdicts"},
        "attempts": [a.to_dict() for a in attempts],
        "leak": analysis["flags"]["leak"], "drift": analysis["flags"]["drift"],
        "spikes": analysis["loss"]["spikes"],
        "resume_ok": resume["continued"] if resume else None,
        "verdicts": verdicts})


def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def render(r: dict) -> str:
    """The result table and the verdict lines."""
    a = r["analysis"]
    t, m, rates = a["throughput"], a["memory"], a["rates"]
    resume = r["resume"]
    rows = [
        ("trial", f"{r['trial']} ({r['chosen_because']})"),
        ("steps", f"{r['steps_trained']} of {r['steps']} trained"
                  + (f", {r['steps_replayed']} replayed after the kill" if resume else "")
                  + f"; {len(r['attempts'])} launch(es), {r['wall_s']:.1f} s"),
        ("loss first -> last", f"{_fmt(a['loss']['first'], '.4f')} -> "
                               f"{_fmt(a['loss']['last'], '.4f')}"),
        ("loss spikes", f"{a['loss']['spikes']} (> {a['loss']['spike_factor']:g} x running "
                        f"median); non-finite {a['loss']['nonfinite']}"),
        ("overflow / skipped", f"{100 * rates['overflow']:.1f} % / "
                               f"{100 * rates['skipped_updates']:.1f} %"),
        ("tokens/s median", _fmt(t.get("median_tokens_per_s"), ",.0f")),
        ("tokens/s drift", (f"{t['drift_pct_per_100_steps']:+.2f} %/100 steps (95 % CI "
                            f"{t['drift_low']:+.2f}..{t['drift_high']:+.2f})")
         if t.get("judged") else "not judged"),
        ("RSS first -> last", f"{_fmt(m['rss_first_gib'], '.3f')} -> "
                              f"{_fmt(m['rss_last_gib'], '.3f')} GiB"),
        ("RSS growth", (f"{m['slope_mib_per_100_steps']:+.1f} MiB/100 steps (95 % CI "
                        f"{m['slope_low']:+.1f}..{m['slope_high']:+.1f})")
         if m.get("judged") else "not judged"),
        ("kill -9 / resume", (f"after step {r['kill']['after_step']}, resumed from "
                              f"{resume['resume_step']}: {resume['compared']} replayed, max "
                              f"rel diff {_fmt(resume['max_rel_diff'], '.3g')}")
         if resume else "none"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = ["", f"{'soak':<{width}}  result", *(f"{k:<{width}}  {v}" for k, v in rows), ""]
    lines += [f"- {v}" for v in r["verdicts"]]
    return "\n".join(lines)


def plot(attempts: list[Attempt], r: dict, path: Path) -> Path:
    """Loss, tokens/s and RSS against the step, one colour per launch, kill and resume
    marked, the memory fit drawn."""
    from matplotlib.figure import Figure

    from autotune.report.plots import DPI, placeholder

    title = f"Soak of trial {r['trial']}"
    if not any(a.steps for a in attempts):
        return placeholder(path, title, "The run made no step.")
    fig = Figure(figsize=(9, 8.5))
    ax_loss, ax_tps, ax_rss = fig.subplots(3, 1, sharex=True)
    colours = ["tab:blue", "tab:orange", "tab:purple", "tab:brown"]
    for a in attempts:
        if not a.steps:
            continue
        label = ("killed run" if a.killed else "resumed run" if a.index else "run")
        c = colours[a.index % len(colours)]
        xs = [s.step for s in a.steps]
        ax_loss.plot(xs, [s.loss for s in a.steps], color=c, lw=1, label=label)
        train = [s for s in a.steps if s.phase.value != "compile" and s.step_s > 0]
        ax_tps.plot([s.step for s in train], [s.tokens / s.step_s for s in train], color=c,
                    lw=0.8, label=label)
        ax_rss.plot(xs, [s.rss_gib * 1024 for s in a.steps], color=c, lw=1, label=label)
        m = r["analysis"]["memory"]
        fit = stability.steady(a.steps)
        if m.get("judged") and fit:
            slope = m["slope_mib_per_100_steps"] / 100
            x = np.array([s.step for s in fit], float)
            y = np.array([s.rss_gib * 1024 for s in fit], float)
            intercept = float(np.median(y - slope * x))
            ax_rss.plot(x, intercept + slope * x, color="k", ls="--", lw=0.8)
    spikes = set(r["analysis"]["loss"]["spike_steps"])
    pts = [(s.step, s.loss) for a in attempts for s in a.steps if s.step in spikes]
    if pts:
        ax_loss.scatter(*zip(*pts), marker="x", color="tab:red", zorder=3, label="spike")
    if r["kill"]:
        for ax in (ax_loss, ax_tps, ax_rss):
            ax.axvline(r["kill"]["after_step"], color="tab:red", ls="--", lw=1,
                       label="kill -9" if ax is ax_loss else None)
            ax.axvline(r["resume"]["resume_step"], color="tab:green", ls=":", lw=1,
                       label="resumed from checkpoint" if ax is ax_loss else None)
    m = r["analysis"]["memory"]
    leak = (f"{m['slope_mib_per_100_steps']:+.1f} MiB/100 steps"
            f"{' LEAK' if m['leak'] else ''}") if m.get("judged") else "not judged"
    ax_loss.set(title=title, ylabel="loss")
    ax_tps.set(ylabel="tokens/s")
    ax_rss.set(ylabel="host RSS (MiB)", xlabel="step", title=f"memory growth: {leak}")
    for ax in (ax_loss, ax_tps, ax_rss):
        ax.grid(alpha=0.3)
    ax_loss.legend(fontsize=8)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


# -- for the exported job's README ----------------------------------------------------------
def soak_section(study: optuna.Study, trial_number: int) -> str:
    """Markdown on the study's soak of ``trial_number``; "" when it was not soaked."""
    r = study.user_attrs.get(SOAK_KEY) or {}
    if r.get("trial") != trial_number or not r.get("analysis"):
        return ""
    a = r["analysis"]
    t, m, rates, resume = a["throughput"], a["memory"], a["rates"], r.get("resume")
    lines = ["## Soak", "",
             f"`python -m autotune soak` ran this configuration for {r['steps_trained']} of "
             f"{r['steps']} steps ({r['steps_from']}), checkpointing every "
             f"{r['checkpoint_every']}: {'finished' if r['finished'] else 'FAILED: '}"
             f"{r.get('failure') or ''} in {r['wall_s']:.0f} s.", ""]
    if resume:
        lines.append(f"- kill -9 after step {r['kill']['after_step']}, resumed from the "
                     f"checkpoint at step {resume['resume_step']}: "
                     + ("loss continued" if resume["continued"] else "loss DID NOT continue")
                     + f" ({resume['compared']} replayed steps, max relative difference "
                       f"{_fmt(resume['max_rel_diff'], '.3g')}, tolerance "
                       f"{resume['tolerance']:g}).")
    else:
        lines.append("- not killed and resumed.")
    if m.get("judged"):
        lines.append(f"- Host memory: {m['slope_mib_per_100_steps']:+.1f} MiB per 100 steps "
                     f"(95 % CI {m['slope_low']:+.1f}..{m['slope_high']:+.1f}): "
                     + ("**leak**" if m["leak"] else "no leak")
                     + f" (threshold {m['threshold_mib_per_100_steps']:g}).")
    if t.get("judged"):
        lines.append(f"- tokens/s: median {t['median_tokens_per_s']:,.0f}, drift "
                     f"{t['drift_pct_per_100_steps']:+.2f} % per 100 steps (95 % CI "
                     f"{t['drift_low']:+.2f}..{t['drift_high']:+.2f}), first to last decile "
                     f"{t['decile_change_pct']:+.1f} %"
                     + (": **drifts**." if t["drifting"] else ": steady."))
    lines.append(f"- Loss spikes: {a['loss']['spikes']} (loss > {a['loss']['spike_factor']:g}"
                 f" x the running median); non-finite losses: {a['loss']['nonfinite']}; "
                 f"overflow {100 * rates['overflow']:.1f} %, skipped updates "
                 f"{100 * rates['skipped_updates']:.1f} %.")
    lines += ["", f"Plot: `{r['plot']}`", ""]
    return "\n".join(lines)
