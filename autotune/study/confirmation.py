"""confirm's verdicts: which trials it re-measures, in what order, and what their rounds
say (a spread per finalist, a paired test against the baseline), as the schema's
:class:`~autotune.study.schema.confirm.ConfirmVerdict`.

Pure functions over records and the measured rounds; running the rounds is
autotune/running/confirm.py, the verb autotune/commands/confirm.py.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.presentation.labels import params_label
from autotune.study import selection
from autotune.study.noise import PairedTest, paired_test
from autotune.study.records import TrialRecord, unit_of
from autotune.study.schema.confirm import ConfirmVerdict
from autotune.study.schema.confirm import PairedTest as StoredTest
from trials.contract.units import rate

#: The baseline's speed now over its speed before beyond which the machine's speed is said
#: to have changed (a factor: 1.25 = 25 % faster or slower): well beyond the 5-10 %
#: run-to-run noise of a quiet shared machine (BENCHMARKS.md, "repeatability"). Confirm
#: and the sweep's re-measurements of the baseline both judge by it.
SPEED_CHANGE = 1.25
#: A paired interval wider than this (a fraction: 0.1 = 10 points) on 2 rounds gets a note.
WIDE_INTERVAL = 0.10

#: A finalist's verdict, typed or as stored (what tests and old callers pass).
Verdicts = dict[int, ConfirmVerdict | dict]


def spread(values: list[float]) -> ConfirmVerdict:
    """The spread of a finalist's confirmed tokens/s (no test yet)."""
    arr = np.asarray(values, dtype=float)
    return ConfirmVerdict(
        tokens_per_s=[float(v) for v in arr], median=float(np.median(arr)),
        p10=float(np.percentile(arr, 10)), p90=float(np.percentile(arr, 90)),
        min=float(arr.min()), max=float(arr.max()),
        cv=float(arr.std() / arr.mean()) if arr.size > 1 and arr.mean() else 0.0)


def stored_test(test: PairedTest | None) -> StoredTest | None:
    """A paired test as stored on the study (what export and report read)."""
    if test is None:
        return None
    g = test.gain
    return StoredTest(ratio=g.ratio, low=g.low, high=g.high, p_value=test.p_value,
                      rounds=test.rounds, real=g.real, text=test.text())


def rounds_of(runs: dict[int, list[float | None]], a: int, b: int,
              loaded: dict[int, list[bool]] | None = None) -> tuple[list, list]:
    """The rounds where both ``a`` and ``b`` finished (a failed run drops its round) under
    the same conditions: both quiet, or both under load. A round where one of the two ran
    under load compares the load, not the configurations, and never counts: when too
    few rounds remain, there is no paired test (a claim rests on the sweep's interval).
    Falling back to every round turned a baseline that met a 30 s on / 30 s off hog in
    all three rounds into a "separable" +54 % gain (bench/drift.py, BENCHMARKS.md)."""
    pairs = [(x, y, i) for i, (x, y) in enumerate(zip(runs[a], runs[b])) if x and y]
    if loaded:
        pairs = [p for p in pairs if loaded[a][p[2]] == loaded[b][p[2]]]
    return [x for x, _, _ in pairs], [y for _, y, _ in pairs]


def confirm_finalists(records: list[TrialRecord], base: TrialRecord | None,
                      top_k: int) -> list[TrialRecord]:
    """The baseline, then the ``top_k`` fastest configurations other than it: every gain is
    judged against the baseline, measured side by side. A reused copy, or another trial of
    the baseline's own configuration, is not one of the ``top_k`` (it would re-measure the
    baseline and leave a finalist out)."""
    others = [r for r in selection.distinct(records) if r is not base
              and (base is None or r.params != base.params)]
    chosen = selection.finalists(others, top_k)
    if base is not None and base.ok and base.trial_dir:
        chosen = [base, *chosen]
    return chosen


def round_orders(chosen: list[TrialRecord], repeats: int, *, seed: int
                 ) -> list[list[TrialRecord]]:
    """The order of each round: the finalists shuffled anew every round (seeded)."""
    rng = np.random.default_rng(seed)
    return [[chosen[i] for i in rng.permutation(len(chosen))] for _ in range(repeats)]


def verdicts(chosen: list[TrialRecord], runs: dict[int, list[float | None]],
             base: TrialRecord | None, loaded: dict[int, list[bool]]
             ) -> dict[int, ConfirmVerdict]:
    """Each finalist with a finished run: its spread and (not the baseline) its paired
    test against the baseline within rounds."""
    out = {}
    for r in chosen:
        measured = [v for v in runs[r.number] if v]
        if not measured:
            continue
        out[r.number] = verdict = spread(measured)
        if base is not None and r.number != base.number and base.number in runs:
            verdict.vs_baseline = stored_test(
                paired_test(*rounds_of(runs, r.number, base.number, loaded)))
            verdict.baseline = base.number
    return out


def _typed(summary: Verdicts) -> dict[int, ConfirmVerdict]:
    return {n: v if isinstance(v, ConfirmVerdict) else ConfirmVerdict.from_json(v)
            for n, v in summary.items()}


def too_few_rounds(summary: Verdicts) -> str | None:
    """A note when a finalist's paired test against the baseline rests on 2 rounds or fewer
    and its interval came out wide (the rounds' spread times Student's t at 1 degree of
    freedom, 12.7: too wide to separate gains of a few percent), or when it has no test at
    all (fewer than 2 rounds whose two runs met the same load: ``confirm.repeats=1``, or a
    load on every round but one); None otherwise."""
    typed = _typed(summary)
    untested = sorted((n for n, v in typed.items()
                       if v.baseline is not None and v.vs_baseline is None), key=int)
    short = {n: v.vs_baseline.rounds for n, v in typed.items()
             if v.vs_baseline is not None and v.vs_baseline.rounds <= 2
             and v.vs_baseline.width > WIDE_INTERVAL}
    if not short and not untested:
        return None
    from scipy.stats import t  # only here: keeps the command's start-up short

    fix = (f"5 clean rounds make it {t.ppf(0.975, 4):.1f} x the rounds' spread "
           "(confirm.repeats=5, on a quiet host: a round whose two runs met different load "
           "is left out)")
    notes = []
    if untested:
        notes.append(f"note: trial {', '.join(f'#{n}' for n in untested)} has no paired test "
                     "against the baseline: it needs 2 rounds or more where both runs met the "
                     f"same load; {fix}")
    if short:
        fewest = min(short.values())
        which = ", ".join(f"#{n}" for n in sorted(short, key=int))
        factor = t.ppf(0.975, fewest - 1) if fewest > 1 else math.inf
        notes.append(f"note: the paired test of trial {which} rests on {fewest} round(s) (a "
                     "round counts where both its runs met the same load): its 95 % interval "
                     f"is {factor:.1f} x the rounds' spread, too wide to separate gains of a "
                     f"few %; {fix}")
    return "\n".join(notes)


def paired_against_medians(summary: Verdicts) -> str | None:
    """A note when a finalist's paired gain and its median against the baseline's point
    opposite ways (a median of 2,790 beside the baseline's 2,753 printed -3.9 %): the test
    pairs each round's two runs, so a round where the machine was faster for both counts as
    one comparison, not as a faster finalist. None when none does."""
    typed = _typed(summary)
    opposite = []
    for n, v in typed.items():
        base = typed.get(v.baseline) if v.baseline is not None else None
        test = v.vs_baseline
        if test is None or base is None or not v.median or not base.median:
            continue
        by_median = v.median / base.median - 1
        if by_median * test.ratio < 0:
            opposite.append(f"#{n} ({100 * by_median:+.1f} % by medians, "
                            f"{100 * test.ratio:+.1f} % paired)")
    if not opposite:
        return None
    return (f"note: trial {', '.join(opposite)}: the medians and the paired test point "
            "opposite ways; the paired test compares each round's two runs, measured side by "
            "side, so the machine's drift between rounds cancels in it and not in the medians: "
            "read the paired figure")


def speed_changed(ratio: float | None) -> bool:
    """A speed ``ratio`` (now over before) beyond :data:`SPEED_CHANGE` either way."""
    return ratio is not None and not 1 / SPEED_CHANGE < ratio < SPEED_CHANGE


def speed_change(base: TrialRecord | None, confirmed: ConfirmVerdict | None) -> str | None:
    """A note when the baseline ran at another speed here than in the sweep, or None."""
    if base is None or confirmed is None or not confirmed.median or not base.standing:
        return None
    ratio = confirmed.median / base.standing
    if not speed_changed(ratio):
        return None
    unit = rate(base.perf.unit, short=True)
    return (f"note: the baseline (trial {base.number}) ran at {confirmed.median:,.0f} {unit} "
            f"here and {base.standing:,.0f} {unit} in the sweep ({ratio:.2f}x): the "
            "machine's speed changed between them. Compare only the gains above, measured "
            "side by side within rounds; the sweep's figures were measured under other "
            "conditions.")


def render(chosen: list[TrialRecord], summary: Verdicts,
           runs: dict[int, list[float | None]], base: TrialRecord | None,
           loaded: dict[int, list[bool]] | None = None) -> str:
    """confirm's table: each finalist's sweep figure (the leaderboard's), confirmed median
    and spread, and its test against the baseline; then the top two against each other."""
    typed = _typed(summary)
    sweep_rate = f"sweep {rate(unit_of(chosen), short=True)}"
    lines = [f"{'trial':>5}  {sweep_rate:>12}  {'median':>10}  {'min..max':>19}  "
             f"{'CV':>6}  {'vs baseline (paired t-test)':<44}  knobs"]
    ranked = sorted(chosen, key=lambda r: -((v := typed.get(r.number)) and v.median or 0))
    for r in ranked:
        s = typed.get(r.number)
        if s is None:
            lines.append(f"{r.number:>5}  {r.standing:>12,.0f}  {'failed':>10}")
            continue
        if base is not None and r.number == base.number:
            versus = "baseline"
        else:
            test = s.vs_baseline
            versus = (f"{100 * test.ratio:+.1f} % ({100 * test.low:+.1f}.."
                      f"{100 * test.high:+.1f}), p={test.p_value:.3f}"
                      f"{'' if test.real else ' noise'}") if test else "too few rounds"
        lines.append(f"{r.number:>5}  {r.standing:>12,.0f}  {s.median:>10,.0f}  "
                     f"{s.min:>9,.0f}..{s.max:<8,.0f}  {100 * s.cv:>5.1f}%  "
                     f"{versus:<44}  {params_label(r.params)}")
    top = [r for r in ranked if r.number in typed][:2]
    # The top two are tested against each other only when neither is the baseline: a
    # finalist against the baseline is its row's test already.
    if len(top) == 2 and (base is None or base.number not in {r.number for r in top}):
        a, b = top
        test = paired_test(*rounds_of(runs, a.number, b.number, loaded))
        verdict = (f"{test.text()}; either is fine" if test is not None and not test.gain.real
                   else test.text() if test is not None else "too few complete rounds to test")
        lines.append(f"top two (trial {a.number} vs trial {b.number}): {verdict}")
    return "\n".join(lines)
