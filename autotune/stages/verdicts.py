"""One line per stage of ``tune``: what it concluded, said at the end so that "all stages
done" is never the last word on a run whose soak found a drift."""

from __future__ import annotations

from autotune.search.space import PRECISION
from autotune.study.schema.soak import SoakVerdict
from autotune.study.schema.stages import StageResult
from trials.contract.units import rate


def soak_issues(soak: SoakVerdict) -> list[str]:
    """What a soak (its stored result) found wrong, as words; empty when it found nothing."""
    issues = []
    if not soak.finished:
        issues.append(f"FAILED: {soak.failure or 'did not finish'}")
    if soak.drift:
        issues.append(f"{rate(soak.unit)} DRIFTS")
    if soak.leak:
        issues.append("host memory LEAKS")
    if soak.loss_rising:
        issues.append("the loss RISES over the run's second half")
    if soak.spikes:
        issues.append(f"{soak.spikes} loss spike(s)")
    if soak.resume_ok is False:
        issues.append("the resumed run does not replay the killed run")
    return issues


def verdict(stage: str, result: StageResult) -> str:
    """The stage's conclusion in one line (``result`` is its stored result)."""
    if result.failed:
        return f"{stage}: FAILED ({'; '.join(result.lines[-1:]) or 'see above'})"
    if stage == "correctness":
        out = result.ruled_out.get(PRECISION) or {}
        if out:
            return f"correctness: passed; ruled out: {', '.join(sorted(out))}"
        return "correctness: passed (every precision follows the baseline's loss)"
    if stage == "memory":
        if result.fit is None:
            return f"memory: {(result.lines or ['no estimate'])[0]}"
        return (f"memory: {result.fit:,} of "
                f"{f'{result.points:,}' if result.points is not None else '?'} points fit "
                f"with headroom, {result.tight:,} only without, {result.over:,} not at all")
    if stage == "stability":
        if result.issues is None:
            return "stability: see the soak's lines above"
        who = f"trial {result.trial}" if result.trial is not None else "the pick"
        issues = result.issues
        return (f"stability ({who}): {'; '.join(issues)}" if issues
                else f"stability ({who}): stable (no drift, leak, spike or rising loss; "
                "resume replays)")
    if stage == "throughput":  # how the sweep ended, and its pick
        return f"throughput: {'; '.join(result.lines) or 'done'}"
    return f"{stage}: {(result.lines or ['done'])[0]}"
