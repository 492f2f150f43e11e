"""One line per stage of ``tune``: what it concluded, said at the end so that "all stages
done" is never the last word on a run whose soak found a drift."""

from __future__ import annotations

from trials.contract.units import rate


def soak_issues(soak: dict) -> list[str]:
    """What a soak (its stored result) found wrong, as words; empty when it found nothing."""
    issues = []
    if not soak.get("finished", True):
        issues.append(f"FAILED: {soak.get('failure') or 'did not finish'}")
    if soak.get("drift"):
        issues.append(f"{rate(soak.get('unit'))} DRIFTS")
    if soak.get("leak"):
        issues.append("host memory LEAKS")
    if soak.get("loss_rising"):
        issues.append("the loss RISES over the run's second half")
    if soak.get("spikes"):
        issues.append(f"{soak['spikes']} loss spike(s)")
    if soak.get("resume_ok") is False:
        issues.append("the resumed run does not replay the killed run")
    return issues


def verdict(stage: str, result: dict) -> str:
    """The stage's conclusion in one line (``result`` is its stored result)."""
    if result.get("failed"):
        return f"{stage}: FAILED ({'; '.join(result.get('lines', [])[-1:]) or 'see above'})"
    if stage == "correctness":
        out = result.get("ruled_out", {}).get("precision") or {}
        if out:
            return f"correctness: passed; ruled out: {', '.join(sorted(out))}"
        return "correctness: passed (every precision follows the baseline's loss)"
    if stage == "memory":
        if "fit" not in result:
            return f"memory: {(result.get('lines') or ['no estimate'])[0]}"
        return (f"memory: {result['fit']} of {result.get('points', '?')} points fit with "
                f"headroom, {result.get('tight', 0)} only without, {result.get('over', 0)} "
                "not at all")
    if stage == "stability":
        if "issues" not in result:
            return "stability: see the soak's lines above"
        who = f"trial {result['trial']}" if result.get("trial") is not None else "the pick"
        issues = result["issues"]
        return (f"stability ({who}): {'; '.join(issues)}" if issues
                else f"stability ({who}): stable (no drift, leak, spike or rising loss; "
                "resume replays)")
    return f"{stage}: {(result.get('lines') or ['done'])[0]}"
