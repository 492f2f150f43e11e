"""Which trials count, which fit, which is best: one answer for the sweep, the leaderboard,
the report, ``confirm`` and ``export``.

Every function is pure over :class:`~autotune.study.records.TrialRecord` lists.
"""

from __future__ import annotations

from autotune.study.records import TrialRecord

BASELINE_ROLE = "baseline"


def distinct(records: list[TrialRecord]) -> list[TrialRecord]:
    """Trials that measured something of their own: no reused copies, no lost attempts."""
    return [r for r in records if r.reused_from is None
            and (r.reason is None or r.reason.evaluated)]


def budget_of(record: TrialRecord, default: float | None) -> float | None:
    """The memory budget the trial ran under (its scorecard), else ``default``."""
    budget = (record.scorecard.get("resources") or {}).get("memory_budget_gib")
    return float(budget) if budget is not None else default


def headroom_gib(record: TrialRecord, default_budget: float | None) -> float | None:
    budget = budget_of(record, default_budget)
    if budget is None or record.peak_memory_gib is None:
        return None
    return budget - record.peak_memory_gib


def feasible(record: TrialRecord, budget_gib: float | None, *,
             min_headroom_gib: float = 0.0) -> bool:
    """Completed, measured, and within the memory budget with ``min_headroom_gib`` to spare
    (where peak and budget are known; an unknown one passes only when no headroom is asked)."""
    if not record.ok or record.tokens_per_s is None:
        return False
    room = headroom_gib(record, budget_gib)
    if room is None:
        return min_headroom_gib <= 0
    return room >= min_headroom_gib


def feasible_records(records: list[TrialRecord], budget_gib: float | None, *,
                     min_headroom_gib: float = 0.0) -> list[TrialRecord]:
    return [r for r in distinct(records)
            if feasible(r, budget_gib, min_headroom_gib=min_headroom_gib)]


def best(records: list[TrialRecord], budget_gib: float | None, *,
         min_headroom_gib: float = 0.0) -> TrialRecord | None:
    """The fastest feasible trial (lowest number on ties)."""
    candidates = feasible_records(records, budget_gib, min_headroom_gib=min_headroom_gib)
    return max(candidates, key=lambda r: (r.tokens_per_s, -r.number), default=None)


def finalists(records: list[TrialRecord], top_k: int,
              budget_gib: float | None = None) -> list[TrialRecord]:
    """The ``top_k`` fastest feasible trials that have a run directory to re-run."""
    done = [r for r in feasible_records(records, budget_gib) if r.trial_dir]
    return sorted(done, key=lambda r: (-r.tokens_per_s, r.number))[:top_k]


def baseline(records: list[TrialRecord]) -> TrialRecord | None:
    """The baseline configuration's trial; a completed retry of it when the first was lost."""
    first = next((r for r in records if r.role == BASELINE_ROLE), None)
    if first is None:
        return None
    same = [r for r in distinct(records) if r.params == first.params]
    return min(same, key=lambda r: (not r.ok, r.number), default=first)


def pareto_front(records: list[TrialRecord]) -> list[TrialRecord]:
    """Completed trials no other beats on both tokens/s (up) and peak memory (down)."""
    points = [r for r in distinct(records)
              if r.ok and r.tokens_per_s is not None and r.peak_memory_gib is not None]

    def dominated(p: TrialRecord) -> bool:
        return any(q.tokens_per_s >= p.tokens_per_s and q.peak_memory_gib <= p.peak_memory_gib
                   and (q.tokens_per_s > p.tokens_per_s or q.peak_memory_gib < p.peak_memory_gib)
                   for q in points)

    return sorted((p for p in points if not dominated(p)), key=lambda r: r.peak_memory_gib)


def measured_tokens_per_s(record: TrialRecord) -> float | None:
    """tokens/s of a completed trial, or what a stopped one had measured so far."""
    if record.tokens_per_s is not None:
        return record.tokens_per_s
    return (record.scorecard.get("performance") or {}).get("tokens_per_s")
