"""The report's "Where the time goes" section: the winner's profile, or what stands in.

Reads the profiles stored on the study (``python -m autotune profile``, or the
sweep's profile of its winner). Without one, the pick's scorecard still says its data
wait, and for dp > 1 its all-reduce share and per-rank step times; the same rules
(autotune/profiling/rules.py) judge them.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from autotune.presentation.findings import Finding
from autotune.presentation.invocation import autotune_command
from autotune.presentation.labels import mib_text
from autotune.profiling import rules
from autotune.profiling.profile import findings_of, load_note, overhead_text
from autotune.study.records import TrialRecord
from autotune.study.schema.profile import ProfileResult
from trials.contract.breakdown import MemoryStats

FIGURE = "where_the_time_goes.png"


@dataclass
class TimeSection:
    lines: list[str] = field(default_factory=list)  # markdown
    figure: str | None = None  # file name next to index.md
    findings: list[Finding] = field(default_factory=list)


def _chosen(profiles: dict[int, ProfileResult], pick: TrialRecord | None
            ) -> ProfileResult | None:
    """The pick's profile, else the latest stored (the highest trial number)."""
    if pick is not None and pick.number in profiles:
        return profiles[pick.number]
    return profiles[max(profiles)] if profiles else None


def section(records: list[TrialRecord], profiles: dict[int, ProfileResult],
            pick: TrialRecord | None,
            out: Path) -> TimeSection:
    """``pick``: the study's pick (what export and soak take), whose profile is shown."""
    chosen = _chosen(profiles, pick)
    if chosen is None:
        return _without_profile(pick)
    p, trial = chosen.profile, chosen.trial
    note = [] if pick is None or trial == pick.number else [
        f"Not the pick (#{pick.number}), which has no profile: "
        f"`{autotune_command('profile', f'profile.trial={pick.number}')}` profiles it.", ""]
    if loaded := load_note(chosen):
        note += [f"{loaded[0].upper()}{loaded[1:]}.", ""]
    # matplotlib on first use: every command imports this module, few draw.
    from autotune.profiling.figure import where_the_time_goes

    where_the_time_goes(p, out / FIGURE, title=f"Where the time goes: trial {trial}, "
                                               f"{p.steps} profiled steps")
    lines = [*note, f"Trial #{trial}, {p.steps} steps profiled after its measured steps: "
             f"{1e3 * p.step_s:.2f} ms a step (the loop's period), split below; "
             f"{overhead_text(p)}.", "",
             "| part | ms/step | share |", "|---|---:|---:|"]
    lines += [f"| {cat} | {1e3 * p.seconds[cat]:.2f} | {100 * share:.1f} % |"
              for cat, share in p.shares.items()]
    lines += ["", "| top operator | part | calls/step | ms/step | share |",
              "|---|---|---:|---:|---:|"]
    lines += [f"| {r.type} | {r.category} | {r.calls_per_step:.0f} | "
              f"{r.ms_per_step:.3f} | {100 * r.share:.1f} % |" for r in p.top_ops]
    m = p.memory
    if m.peak_mib is not None:
        lines += ["", f"Memory ({m.source}): peak {mib_text(m.peak_mib)}, mean "
                      f"{mib_text(m.mean_mib)} (peak/mean {m.peak_over_mean:.2f})."
                  + _rss(m.rss)]
    lines += ["", f"Files: `{chosen.dir}` (trace.json opens in Perfetto or "
                  "chrome://tracing; raw/ in MindStudio Insight)."]
    return TimeSection(lines=lines, figure=FIGURE, findings=_not_input(findings_of(chosen)))


def _rss(rss: MemoryStats) -> str:
    if not rss.peak_mib:
        return ""
    return (f" Host RSS (sampled every 2 ms): peak {mib_text(rss.peak_mib)}, mean "
            f"{mib_text(rss.mean_mib)}.")


def _without_profile(pick: TrialRecord | None) -> TimeSection:
    if pick is None:
        return TimeSection(lines=["No completed trial to say where its time goes."])
    perf = pick.perf
    evidence = rules.from_performance(perf, trial=pick.number, dp=len(perf.rank_step_s) or 1)
    lines = [f"No profile of trial #{pick.number} yet: run "
             f"`{autotune_command('profile', f'profile.trial={pick.number}')}` for the step "
             "split, the top operators and the memory curve."]
    if perf.data_wait_share is not None:
        lines.append(f"From its measured steps: data wait {100 * perf.data_wait_share:.1f} % "
                     "of the step.")
    if perf.comm_share is not None:
        lines.append(f"Gradient all-reduce (timed alone): {1e3 * (perf.comm_s or 0):.2f} ms, "
                     f"{100 * perf.comm_share:.1f} % of the step; per-rank step spread "
                     f"{100 * (perf.rank_spread or 0):.1f} %.")
    return TimeSection(lines=lines, findings=_not_input(rules.diagnose(evidence)))


def _not_input(findings: list[Finding]) -> list[Finding]:
    """The step's findings less whether it is input-bound: the report's diagnosis says that
    first (its data_bound and pipeline rules, by the same rule: study/data_bound.py)."""
    return [f for f in findings if f.rule != "data_wait"]


def markdown(s: TimeSection) -> list[str]:
    out = ["## Where the time goes", "", *s.lines, ""]
    if s.figure:
        out += [f"[![Where the time goes]({s.figure})]({s.figure})", ""]
    return out


def html_lines(s: TimeSection, image_src: str | None) -> list[str]:
    """The section as HTML; the markdown tables are shown preformatted."""
    out = ["<h2>Where the time goes</h2>",
           f"<pre>{html.escape(chr(10).join(s.lines))}</pre>"]
    if image_src:
        out.append(f"<img alt='Where the time goes' src='{image_src}'>")
    return out
