"""A soak's result: summarised, printed, plotted, and as the exported job's README section."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import optuna

from autotune.settings import SoakSettings
from autotune.soak import stability
from autotune.soak.attempts import Attempt, kill_and_resume, stitch
from autotune.soak.plan import SoakPlan
from autotune.study.layout import SoakFiles
from autotune.study.schema.keys import SOAK
from autotune.study.schema.soak import Kill, SoakAnalysis, SoakVerdict, soak_of
from trials.contract.jsonsafe import float_of
from trials.contract.units import rate

#: Study attribute with the latest soak's result (tune's stability stage reads it too).
SOAK_KEY = SOAK


# -- the result -----------------------------------------------------------------------------
def host_line(attempts: list[Attempt], contention_cores: float) -> str | None:
    """What other processes did to the host over the soak, each launch judged as every
    trial's run is (``Conditions.judge``): a drift measured while they used more than
    ``contention_cores`` may be theirs, not the job's. None where nothing was measured."""
    judged = [a.conditions.judge(contention_cores) for a in attempts
              if a.conditions is not None and a.conditions.other_cores is not None]
    if not judged:
        return None
    worst = max(c.other_cores for c in judged)
    if any(c.contended for c in judged):
        return (f"host: other processes used {worst:.2f} cores over a launch (above "
                f"sweep.contention_cores={contention_cores:g}): a throughput drift may be "
                "theirs, not the job's; soak again on a quiet host to tell")
    return (f"host: quiet (other processes used at most {worst:.2f} cores over a launch): "
            "a throughput drift is the job's or the machine's own")


def summarise(plan: SoakPlan, attempts: list[Attempt], failed: str | None,
              options: SoakSettings, wall_s: float, out: Path, *,
              contention_cores: float = math.inf) -> SoakVerdict:
    steps, restarts = stitch(attempts)
    tokens = next((s.tokens for s in steps if s.tokens), None)
    analysis = stability.analyse(steps, spike_factor=stability.SPIKE_FACTOR,
                                 leak_mib_per_100_steps=options.leak_mib_per_100_steps,
                                 tokens_per_step=tokens, restarts=restarts, unit=plan.unit)
    resume = kill_and_resume(attempts, options.resume_tolerance)
    finished = failed is None
    verdicts = []
    if plan.planned_kill is not None and resume is None:
        verdicts.append("kill: the run ended before the kill point; nothing was resumed")
    if resume is not None:
        verdicts.append(resume.verdict)
    verdicts.extend(stability.verdicts(analysis))
    host = host_line(attempts, contention_cores)
    if host:
        verdicts.append(host)
    verdicts.append(f"finished: {len(steps)} of {plan.steps} steps in {len(attempts)} "
                    f"launch(es), {wall_s:.1f} s" if finished else f"FAILED: {failed}")
    replayed = sum(len(a.steps) for a in attempts) - len(steps)
    return SoakVerdict(
        trial=plan.trial, chosen_because=plan.why, config=str(plan.config), steps=plan.steps,
        steps_from=plan.steps_from, checkpoint_every=plan.checkpoint_every,
        kill_at=plan.kill_at,
        planned_kill_after_step=plan.planned_kill - 1 if plan.planned_kill else None,
        overrides=plan.overrides, trial_step_s=plan.step_s, world_size=plan.world_size,
        unit=plan.unit, out=str(out), plot=str(SoakFiles(out).plot),
        metrics=str(SoakFiles(out).metrics),
        finished=finished, failure=failed, exit_code=0 if finished else 1,
        wall_s=round(wall_s, 2), steps_trained=len(steps), steps_replayed=replayed,
        kill=(Kill(after_step=resume.kill_done - 1, checkpoint_step=resume.kill_checkpoint,
                   after_s=resume.killed_after_s) if resume else None),
        resume=resume, analysis=analysis, attempts=[a.launch() for a in attempts],
        leak=analysis.flags.leak, drift=analysis.flags.drift,
        loss_rising=analysis.flags.loss_rising, spikes=analysis.loss.spikes,
        resume_ok=resume.continued if resume else None, verdicts=verdicts)


def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(float_of(value), spec)


def render(r: SoakVerdict) -> str:
    """The result table and the verdict lines."""
    a = r.analysis or SoakAnalysis()
    t, m, rates, lt = a.throughput, a.memory, a.rates, a.loss_trend
    resume, kill = r.resume, r.kill or Kill()
    per_s = rate(r.unit)
    rows = [
        ("trial", str(r.trial)),
        ("steps", f"{r.steps_trained} of {r.steps} trained"
                  + (f", {r.steps_replayed} replayed after the kill" if resume else "")
                  + f"; {len(r.attempts)} launch(es), {r.wall_s:.1f} s"),
        ("loss first -> last", f"{_fmt(a.loss.first, '.4f')} -> {_fmt(a.loss.last, '.4f')}"),
        ("loss, second half", (f"{lt.pct_per_100_steps:+.2f} %/100 steps (95 % CI "
                               f"{lt.low:+.2f}..{lt.high:+.2f})"
                               + (": RISING" if lt.rising else ""))
         if lt.judged else "not judged"),
        ("loss spikes", f"{a.loss.spikes} (> {a.loss.spike_factor:g} x running "
                        f"median); non-finite {a.loss.nonfinite}"),
        ("overflow / skipped", f"{100 * rates.overflow:.1f} % / "
                               f"{100 * rates.skipped_updates:.1f} %"),
        (f"{per_s} median", _fmt(t.median_tokens_per_s, ",.0f")),
        (f"{per_s} drift", (f"{t.drift_pct_per_100_steps:+.2f} %/100 steps (95 % CI "
                            f"{t.drift_low:+.2f}..{t.drift_high:+.2f})")
         if t.judged else "not judged"),
        # Anonymous memory (heap, shared memory), not the RSS peak a trial or a job reports:
        # a leak shows in it ("RSS" here read beside a job's "peak RSS 0.90 GiB").
        ("anonymous memory first -> last", f"{_fmt(m.rss_first_gib, '.3f')} -> "
                                           f"{_fmt(m.rss_last_gib, '.3f')} GiB"),
        ("its growth within a launch", (f"{m.slope_mib_per_100_steps:+.1f} MiB/100 steps "
                                        f"(95 % CI {m.slope_low:+.1f}..{m.slope_high:+.1f})")
         if m.judged else "not judged"),
        ("kill -9 / resume", (f"after step {kill.after_step}, resumed from "
                              f"{resume.resume_step}: {resume.compared} replayed, max "
                              f"rel diff {_fmt(resume.max_rel_diff, '.3g')}")
         if resume else "none"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = ["", f"{'soak':<{width}}  result", *(f"{k:<{width}}  {v}" for k, v in rows), ""]
    lines += [f"- {v}" for v in r.verdicts]
    return "\n".join(lines)


def plot(attempts: list[Attempt], r: SoakVerdict, path: Path) -> Path:
    """Loss, throughput and RSS against the step, one colour per launch, kill and resume
    marked, the memory fit drawn."""
    from matplotlib.figure import Figure

    from autotune.presentation.figures import DPI, placeholder

    title = f"Soak of trial {r.trial}"
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
        m = (r.analysis or SoakAnalysis()).memory
        fit = stability.steady(a.steps)
        if m.judged and fit:
            slope = m.slope_mib_per_100_steps / 100
            x = np.array([s.step for s in fit], float)
            y = np.array([s.rss_gib * 1024 for s in fit], float)
            intercept = float(np.median(y - slope * x))
            ax_rss.plot(x, intercept + slope * x, color="k", ls="--", lw=0.8)
    spikes = set((r.analysis or SoakAnalysis()).loss.spike_steps)
    pts = [(s.step, s.loss) for a in attempts for s in a.steps if s.step in spikes]
    if pts:
        ax_loss.scatter(*zip(*pts), marker="x", color="tab:red", zorder=3, label="spike")
    if r.kill is not None and r.resume is not None:
        for ax in (ax_loss, ax_tps, ax_rss):
            ax.axvline(r.kill.after_step, color="tab:red", ls="--", lw=1,
                       label="kill -9" if ax is ax_loss else None)
            ax.axvline(r.resume.resume_step, color="tab:green", ls=":", lw=1,
                       label="resumed from checkpoint" if ax is ax_loss else None)
    m = (r.analysis or SoakAnalysis()).memory
    leak = (f"{m.slope_mib_per_100_steps:+.1f} MiB/100 steps"
            f"{' LEAK' if m.leak else ''}") if m.judged else "not judged"
    ax_loss.set(title=title, ylabel="loss")
    ax_tps.set(ylabel=rate(r.unit))
    ax_rss.set(ylabel="anonymous memory (MiB)", xlabel="step", title=f"memory growth: {leak}")
    for ax in (ax_loss, ax_tps, ax_rss):
        ax.grid(alpha=0.3)
    ax_loss.legend(fontsize=8)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


# -- for the exported job's README ----------------------------------------------------------
def soak_section(study: optuna.Study, trial_number: int, *, plot: str | None = None) -> str:
    """Markdown on the study's soak of ``trial_number``; "" when it was not soaked.
    ``plot``: a link for the figure next to the markdown (else its path in the study)."""
    r = soak_of(study, trial_number)
    if r is None or r.analysis is None:
        return ""
    a = r.analysis
    t, m, rates, resume = a.throughput, a.memory, a.rates, r.resume
    lines = ["## Soak", "",
             f"`python -m autotune soak` ran trial #{r.trial} for {r.steps_trained} of "
             f"{r.steps} steps ({r.steps_from}), checkpointing every "
             f"{r.checkpoint_every}: {'finished' if r.finished else 'FAILED: '}"
             f"{r.failure or ''} in {r.wall_s:.0f} s.", ""]
    if resume:
        lines.append(f"- kill -9 after step {(r.kill or Kill()).after_step}, resumed from the "
                     f"checkpoint at step {resume.resume_step}: "
                     + ("loss continued" if resume.continued else "loss DID NOT continue")
                     + f" ({resume.compared} replayed steps, max relative difference "
                       f"{_fmt(resume.max_rel_diff, '.3g')}, tolerance "
                       f"{resume.tolerance:g}).")
    else:
        lines.append("- not killed and resumed.")
    if m.judged:
        lines.append(f"- Host memory: {m.slope_mib_per_100_steps:+.1f} MiB per 100 steps "
                     f"(95 % CI {m.slope_low:+.1f}..{m.slope_high:+.1f}): "
                     + ("**leak**" if m.leak else "no leak")
                     + f" (threshold {m.threshold_mib_per_100_steps:g}).")
    if t.judged:
        lines.append(f"- {rate(r.unit)}: median {t.median_tokens_per_s:,.0f}, drift "
                     f"{t.drift_pct_per_100_steps:+.2f} % per 100 steps (95 % CI "
                     f"{t.drift_low:+.2f}..{t.drift_high:+.2f}), first to last decile "
                     f"{t.decile_change_pct:+.1f} %"
                     + (": **drifts**." if t.drifting else ": steady."))
    lines.append(f"- Loss spikes: {a.loss.spikes} (loss > {a.loss.spike_factor:g}"
                 f" x the running median); non-finite losses: {a.loss.nonfinite}; "
                 f"overflow {100 * rates.overflow:.1f} %, skipped updates "
                 f"{100 * rates.skipped_updates:.1f} %.")
    lines += ["", f"[![Soak]({plot})]({plot})" if plot else
              f"Plot: `{r.plot}` (the study's latest soak; the next one overwrites it)", ""]
    return "\n".join(lines)

