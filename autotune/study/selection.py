"""Which trials count, which fit, which is best: one answer for the sweep, the leaderboard,
the report, ``confirm``, ``export`` and ``soak``.

"Which trial is best" has three honest answers, and :func:`verdict` computes all three
from the records in one place, so that every reader names the same trials:

* **best measured**: the fastest feasible trial by THE tokens/s of a trial
  (:data:`TOKENS_PER_S_LABEL`: every run the sweep measured of it, pooled);
* **confirmed best**: among the trials ``confirm`` re-measured, the highest median of its
  interleaved re-runs (:data:`CONFIRMED_LABEL`), with its paired test against the baseline;
* **the pick**: what export and soak take, and what the report's diagnosis is about: the
  confirmed best where confirm ran (else the best measured), then, among the
  configurations it is not separably faster than, the one with the fewest changes from
  the baseline (the baseline itself when the gain is within noise).

Only the pick is named to users, in one sentence (:mod:`autotune.study.story`); the other
two appear there only as faster-looking trials, each beside why it was not picked.

Every function is pure over :class:`~autotune.study.records.TrialRecord` lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from autotune.settings import ExportSettings
from autotune.study import noise
from autotune.study.records import TrialRecord, baseline, distinct  # noqa: F401
from autotune.study.schema.confirm import ConfirmVerdict
from autotune.study.schema.keys import BASELINE_ROLE  # noqa: F401
from trials.contract.units import rate


def throughput_label(unit: str | None) -> str:
    """What the throughput of a trial is, wherever it is shown (leaderboard, report,
    export), named in the workload's unit (tokens/s, samples/s)."""
    return (f"{rate(unit)} = every run the sweep measured of the trial, pooled (geometric "
            "mean): its own, its racing re-runs and the baseline's re-measurements")


#: The label of a study that counts tokens.
TOKENS_PER_S_LABEL = throughput_label(None)
#: What a confirmed figure is.
CONFIRMED_LABEL = "median of confirm's interleaved re-runs"


def budget_of(record: TrialRecord, default: float | None) -> float | None:
    """The memory budget the trial ran under (its scorecard), else ``default``."""
    budget = record.card.resources.memory_budget_gib
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


def faster_first(record: TrialRecord) -> tuple[float, int]:
    """Sort key, fastest first: its standing over every sweep run of it
    (:attr:`TrialRecord.standing`), the lower number on ties. The one order the best, the
    finalists and export's fastest are taken in."""
    return (-record.standing, record.number)


def best(records: list[TrialRecord], budget_gib: float | None, *,
         min_headroom_gib: float = 0.0) -> TrialRecord | None:
    """The fastest feasible trial (:func:`faster_first`)."""
    candidates = feasible_records(records, budget_gib, min_headroom_gib=min_headroom_gib)
    return min(candidates, key=faster_first, default=None)


def known_slower(record: TrialRecord) -> bool:
    """Separably slower than the baseline in the sweep: the whole interval of its gain
    (:attr:`TrialRecord.vs_baseline`, where :func:`annotate` set it) below zero. One quiet
    run beside a baseline measured under load pools above it and reads -25 % against the
    baseline's runs measured alike."""
    gain = record.vs_baseline
    return gain is not None and gain.high < 0


def known_slower_last(record: TrialRecord) -> tuple[bool, float, int]:
    """Sort key: :func:`faster_first`, with the trials :func:`known_slower` after the rest
    (the leaderboard's rows, confirm's finalists)."""
    return (known_slower(record), *faster_first(record))


def finalists(records: list[TrialRecord], top_k: int,
              budget_gib: float | None = None) -> list[TrialRecord]:
    """The ``top_k`` fastest feasible trials that have a run directory to re-run, those
    known to be slower than the baseline last (:func:`known_slower_last`)."""
    done = [r for r in feasible_records(records, budget_gib) if r.trial_dir]
    return sorted(done, key=known_slower_last)[:top_k]


def pareto_front(records: list[TrialRecord]) -> list[TrialRecord]:
    """Completed trials no other beats on both tokens/s (up: its standing, the figure the
    leaderboard shows) and peak memory (down)."""
    points = [r for r in distinct(records)
              if r.ok and r.standing and r.peak_memory_gib is not None]

    def dominated(p: TrialRecord) -> bool:
        return any(q.standing >= p.standing and q.peak_memory_gib <= p.peak_memory_gib
                   and (q.standing > p.standing or q.peak_memory_gib < p.peak_memory_gib)
                   for q in points)

    return sorted((p for p in points if not dominated(p)), key=lambda r: r.peak_memory_gib)


def measured_tokens_per_s(record: TrialRecord) -> float | None:
    """tokens/s of a completed trial, or what a stopped one had measured so far."""
    if record.tokens_per_s is not None:
        return record.tokens_per_s
    return record.perf.tokens_per_s


# -- the verdict -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """The study's answers to "which trial is best" (see the module docstring), with the
    evidence behind the pick; :func:`autotune.study.story.pick_sentence` says it in words."""

    best_measured: TrialRecord | None
    confirmed_best: TrialRecord | None
    #: What export and soak take and the diagnosis is about; None when nothing qualifies.
    pick: TrialRecord | None
    #: Why the pick, in words with the numbers behind them (provenance, ``choose_trial``).
    why: str
    #: Where the pick started: the confirmed best where confirm ran (``export.use_confirmed``),
    #: else the fastest trial with the headroom asked; the pick is it, or a simpler one.
    top: TrialRecord | None = None
    #: Why the pick is not ``top``: ``top``'s gain over it with its interval (over the
    #: baseline when the pick is the baseline); empty when the pick is ``top``.
    top_vs_pick: str = ""
    #: The pick against the baseline: confirm's paired test where it compared the two,
    #: else the sweep's gain with its interval; empty with nothing to compare with.
    pick_vs_baseline: str = ""
    #: ``export.min_headroom_gib`` and the memory budget the verdict was taken under.
    min_headroom_gib: float = 0.0
    budget_gib: float | None = None


def confirmed_text(record: TrialRecord) -> str:
    """'median 1,234 tokens/s over 4 re-runs (CV 1.2 %)' of a confirmed trial."""
    c = record.confirmed or ConfirmVerdict()
    runs = len(c.tokens_per_s)
    cv = f" (CV {100 * c.cv:.1f} %)" if c.cv is not None else ""
    return f"median {record.confirmed_tokens_per_s:,.0f} {record.rate} over {runs} re-runs{cv}"


def verdict(records: list[TrialRecord], *, prior_cv: float, budget_gib: float | None = None,
            min_headroom_gib: float = 0.0, use_confirmed: bool = True,
            prefer_simpler: bool = True) -> Verdict:
    """Best measured, confirmed best and the pick, from the records alone.

    ``prior_cv``: the run-to-run noise to assume where the study has too few repeats
    (the hardware profile's ``cost.run_to_run_cv``); ``min_headroom_gib``,
    ``use_confirmed``, ``prefer_simpler``: export's options (``export.*``).
    """
    measured = best(records, budget_gib)
    feasible_now = feasible_records(records, budget_gib)
    confirmed_best = _confirmed_best(feasible_now)
    candidates = feasible_records(records, budget_gib, min_headroom_gib=min_headroom_gib)
    found = partial(Verdict, measured, confirmed_best, min_headroom_gib=min_headroom_gib,
                    budget_gib=budget_gib)
    if not candidates:
        return found(None, "no complete trial within the memory budget "
                     f"(headroom {min_headroom_gib:g} GiB)")
    level = noise.run_to_run_noise(records, prior_cv)
    top, why = _fastest(candidates, min_headroom_gib, use_confirmed, level)
    simpler, because, evidence = (top, "", "")
    if prefer_simpler:
        simpler, because, evidence = simplest_within_noise(top, candidates, records, level)
    base = baseline(records)
    versus = "" if base is None or base is simpler or not base.ok \
        else versus_baseline(simpler, base, level)[1]
    if simpler is top:
        return found(top, f"{why}; {because}" if because else why, top=top,
                     pick_vs_baseline=versus)
    return found(simpler, f"{because}; pass export.trial={top.number} to export the fastest "
                 "anyway", top=top, top_vs_pick=evidence, pick_vs_baseline=versus)


def export_verdict(records: list[TrialRecord], options: ExportSettings, *, prior_cv: float,
                   budget_gib: float | None = None) -> Verdict:
    """:func:`verdict` under export's options (``export.*``): what export, soak and the
    report's summary and diagnosis all ask."""
    return verdict(records, prior_cv=prior_cv, budget_gib=budget_gib,
                   min_headroom_gib=options.min_headroom_gib,
                   use_confirmed=options.use_confirmed, prefer_simpler=options.prefer_simpler)


def _confirmed_best(candidates: list[TrialRecord]) -> TrialRecord | None:
    confirmed = [r for r in candidates if r.confirmed_tokens_per_s]
    return max(confirmed, key=lambda r: (r.confirmed_tokens_per_s, -r.number), default=None)


def _fastest(candidates: list[TrialRecord], min_headroom_gib: float,
             use_confirmed: bool, level: noise.Noise) -> tuple[TrialRecord, str]:
    confirmed = _confirmed_best(candidates)
    if use_confirmed and confirmed is not None:
        return confirmed, f"best confirmed, {confirmed_text(confirmed)}"
    top, beaten = unbeaten(candidates, level)
    figure = f"{top.standing:,.0f} {rate(top.perf.unit, short=True)}"
    if beaten:
        figure += (f"; trial(s) {', '.join(str(r.number) for r in beaten)} rank higher by "
                   f"their runs pooled, and it is separably faster than each on runs "
                   "measured alike")
    if min_headroom_gib > 0:
        return top, f"fastest trial with >= {min_headroom_gib:g} GiB memory headroom ({figure})"
    return top, f"best feasible trial ({figure})"


def unbeaten(candidates: list[TrialRecord],
             level: noise.Noise) -> tuple[TrialRecord, list[TrialRecord]]:
    """The fastest candidate (:func:`faster_first`) that no other is separably faster than
    on runs measured alike (:func:`noise.compare`, the final race's rule), and the faster-
    ranked ones passed over for it. A race's survivor is then the pick's start: the pick
    once took a trial the final race had just dropped, by its runs pooled across loads."""
    ordered = sorted(candidates, key=faster_first)
    beaten = noise.separably_slower({r.number: noise.runs_of(r) for r in ordered}, level)
    first = next((i for i, r in enumerate(ordered) if r.number not in beaten), None)
    return (ordered[0], []) if first is None else (ordered[first], ordered[:first])


def changes_from(record: TrialRecord, base: TrialRecord | None) -> int:
    if base is None:
        return 0
    return sum(1 for k, v in record.params.items() if base.params.get(k) != v)


def paired_with(record: TrialRecord, base: TrialRecord) -> bool:
    """Whether confirm tested ``record`` against ``base`` in paired rounds."""
    confirm = record.confirmed
    return confirm is not None and confirm.vs_baseline is not None \
        and confirm.baseline == base.number


def versus_baseline(top: TrialRecord, base: TrialRecord,
                    level: noise.Noise) -> tuple[bool, str]:
    """(is ``top`` really faster than the baseline, the numbers that say so): confirm's
    paired test where it compared the two, else the sweep's interval."""
    if paired_with(top, base):
        test = top.confirmed.vs_baseline
        return test.real and test.ratio > 0, test.text
    gain = sweep_gain(top, base, level)
    if gain is None:
        return True, ""
    return gain.better, gain.text()


def sweep_gain(record: TrialRecord, base: TrialRecord, level: noise.Noise) -> noise.Gain | None:
    """``record``'s gain over the baseline in the sweep: its runs against the baseline's
    beside them in time (:func:`nearest_baseline_runs`), at the study's run-to-run noise
    (widened where the runs compared were measured under load: :func:`noise.compare`).
    The one figure the progress line, the leaderboard, the pick and the diagnosis quote."""
    return noise.compare(noise.runs_of(record), nearest_baseline_runs(base, record), level)


def simplest_within_noise(top: TrialRecord, candidates: list[TrialRecord],
                          records: list[TrialRecord],
                          level: noise.Noise) -> tuple[TrialRecord, str, str]:
    """The candidate with the fewest knob changes from the baseline that ``top`` is not
    separably faster than (``top`` itself when none is simpler), why, and the evidence:
    ``top``'s gain over it (empty when it is ``top``)."""
    base = baseline(records)
    if base is None:
        return top, "", ""
    if base is top:
        return top, "it is the baseline", ""
    numbers = ""
    if base in candidates:  # a completed baseline within the budget
        real, numbers = versus_baseline(top, base, level)
        if not real:
            return base, (f"the fastest, trial {top.number}, against the baseline: "
                          f"{numbers}; so the baseline (trial {base.number}) is exported"), numbers
    within = []
    for r in candidates:
        # The baseline was weighed above, by confirm's paired test where confirm ran: a
        # pooled comparison here would overrule the paired one it just passed.
        if r is top or r is base or changes_from(r, base) >= changes_from(top, base):
            continue
        gain = noise.gain(top, r, level)
        if gain is not None and not gain.better:
            within.append((changes_from(r, base), -(r.standing or 0), r.number, r, gain))
    if not within:
        return top, f"against the baseline: {numbers}" if numbers else "", ""
    _, _, _, simpler, gain = min(within, key=lambda t: t[:3])
    return simpler, (f"trial {simpler.number} changes {changes_from(simpler, base)} knob(s) "
                     f"instead of {changes_from(top, base)}, and the fastest (trial "
                     f"{top.number}) against it: {gain.text()}"), gain.text()


def annotate(records: list[TrialRecord], prior_cv: float) -> noise.Noise:
    """Set ``vs_baseline`` (a :class:`Gain`) on every measured trial; the noise level used."""
    level = noise.run_to_run_noise(records, prior_cv)
    base = baseline(records)
    if base is None or not base.ok or not noise.runs_of(base):
        return level  # no completed baseline: nothing to measure gains against
    by_number = {r.number: r for r in records}
    for record in records:
        source = by_number.get(record.reused_from, record)
        if source.ok and source.tokens_per_s is not None and source is not base:
            record.vs_baseline = sweep_gain(source, base, level)
    return level


def nearest_baseline_runs(base: TrialRecord, trial: TrialRecord) -> list[noise.Run]:
    """The baseline's runs that bracket each of ``trial``'s runs in time (its own, and its
    race's re-runs): the last one that ended before it and the first one after (the
    baseline's first run, its re-measurements, ``sweep.baseline_every``, and its own race
    runs), among those measured under that run's conditions (a quiet run against quiet
    baseline runs, a loaded one against loaded runs where there are any). A machine whose
    speed drifts moves a trial and the baseline runs beside it alike; a load that came and
    went between them does not, so it is not paired. A trial raced against the baseline is
    paired round by round, as the race judged them. Every run where a time is missing (a
    study written before runs carried one)."""
    timed = base.timed_runs()
    own = [(t, loaded) for (t, _), loaded in zip(trial.timed_runs(), trial.sweep_run_loads())]
    if any(t is None for t, _ in (*timed, *own)):
        return noise.runs_of(base)
    runs = [(t, perf, loaded, host) for (t, perf), loaded, host in
            zip(timed, base.sweep_run_loads(), base.sweep_run_conditions())]
    beside: dict[float, tuple] = {}
    for at, loaded in own:
        alike = [run for run in runs if run[2] == loaded]
        beside |= {run[0]: run for run in _bracket(alike or runs, at)}
    paired = [beside[t] for t in sorted(beside)]
    return noise.runs_from([run[1] for run in paired], conditions=[run[3] for run in paired])


def _beside(timed: list[tuple], trial: TrialRecord) -> list[tuple]:
    """The timed runs (tuples that start with when each ended) that bracket ``trial``'s
    end: the last before it, the first after."""
    return _bracket(timed, trial.finished.timestamp() if trial.finished is not None
                    else math.inf)


def _bracket(timed: list[tuple], at: float) -> list[tuple]:
    """The timed runs that bracket the time ``at``: the last that ended by it, the first
    after."""
    before = [tr for tr in timed if tr[0] <= at]
    after = [tr for tr in timed if tr[0] > at]
    return ([max(before, key=lambda tr: tr[0])] if before else []) + \
        ([min(after, key=lambda tr: tr[0])] if after else [])


def versus_baseline_text(records: list[TrialRecord], number: int, prior_cv: float) -> str:
    """Trial ``number``'s gain over the baseline with its interval (a progress line's)."""
    annotate(records, prior_cv)
    record = next(r for r in records if r.number == number)
    if record.role == BASELINE_ROLE:
        return "the baseline: every gain below is measured against it"
    return f"vs baseline {record.vs_baseline.text()}" if record.vs_baseline else ""


def drift_factor(base: TrialRecord | None, trial: TrialRecord) -> float:
    """How fast the machine runs now against when ``trial`` was measured, as the baseline's
    own runs tell it: its latest run's tokens/s over its runs beside ``trial`` in time (1.0
    with no baseline, or no re-measurement since). The slow rule scales the best trial's
    tokens/s by it, so that a trial launched after the machine slowed down is not judged
    against a best measured before."""
    if base is None or not base.ok:
        return 1.0
    timed = [(t, perf) for t, perf in base.timed_runs()
             if t is not None and perf.tokens_per_s]
    if len(timed) < 2:
        return 1.0
    latest = max(timed, key=lambda tr: tr[0])[1].tokens_per_s
    then = noise.runs_from([perf for _, perf in _beside(timed, trial)])
    if not then:
        return 1.0
    then_tps = math.exp(sum(math.log(r.tokens_per_s) for r in then) / len(then))
    return latest / then_tps
