"""``python -m autotune confirm``: re-measure the finalists against measurement noise.

The baseline and the ``top_k`` fastest other distinct configurations run ``repeats``
more times each, interleaved in rounds so that drift of a noisy machine hits all of them
alike. The order inside each round is shuffled (seeded by ``sweep.seed``, printed and stored as
``autotune.confirm_order``): a load that comes and goes on a period could line up with
a fixed order (B A C, B A C, ...) and make a difference that is not there look
separable. Each finalist is tested against the baseline by a paired t-test on log
tokens/s within the rounds (autotune/study/noise.py); the top two against each other
too. When the baseline runs at another speed than it did in the sweep, confirm says so:
the machine changed, and only the within-round gains compare. The medians, spreads and
tests are stored on the study (``autotune.confirm``), the runs themselves with the
trials' repeats, where ``export`` and ``report`` read them. Each run is stored as it
finishes: a confirm stopped part-way (SIGTERM, Ctrl-C) resumes when run again with the
same finalists and rounds, running only what did not finish
(autotune/study/confirm_progress.py).
"""

from __future__ import annotations

import math

import numpy as np
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from autotune.presentation.labels import params_label
from autotune.running.repeat import rerun
from autotune.running.runner import runner_for
from autotune.settings import ConfirmSettings, SweepSettings
from autotune.study import selection
from autotune.study import storage as S
from autotune.study.choice import study_verdict
from autotune.study.confirm_progress import ConfirmProgress
from autotune.study.layout import StudyLayout
from autotune.study.noise import PairedTest, paired_test
from autotune.study.records import (
    CONFIRM_STUDY_KEY,
    TrialRecord,
    load_records,
    measured_under_load,
    unit_of,
)
from trials.contract.performance import Performance
from trials.contract.schema import ConfigError
from trials.contract.units import rate


def spread(values: list[float]) -> dict:
    arr = np.asarray(values, dtype=float)
    return {Performance.TOKENS_PER_S: [float(v) for v in arr], "median": float(np.median(arr)),
            "p10": float(np.percentile(arr, 10)), "p90": float(np.percentile(arr, 90)),
            "min": float(arr.min()), "max": float(arr.max()),
            "cv": float(arr.std() / arr.mean()) if arr.size > 1 and arr.mean() else 0.0}


def test_record(test: PairedTest | None) -> dict | None:
    """A paired test as stored on the study (what export and report read)."""
    if test is None:
        return None
    g = test.gain
    return {"ratio": g.ratio, "low": g.low, "high": g.high, "p_value": test.p_value,
            "rounds": test.rounds, "real": g.real, "text": test.text()}


#: Fewest clean rounds a paired test keeps before it falls back to every round.
MIN_CLEAN_ROUNDS = 2


def rounds_of(runs: dict[int, list[float | None]], a: int, b: int,
              loaded: dict[int, list[bool]] | None = None) -> tuple[list, list]:
    """The rounds where both ``a`` and ``b`` finished (a failed run drops its round), less
    the rounds where either was measured under load (the pair was then measured under
    different conditions), as long as :data:`MIN_CLEAN_ROUNDS` remain."""
    pairs = [(x, y, i) for i, (x, y) in enumerate(zip(runs[a], runs[b])) if x and y]
    if loaded:
        clean = [p for p in pairs if not (loaded[a][p[2]] or loaded[b][p[2]])]
        if len(clean) >= MIN_CLEAN_ROUNDS:
            pairs = clean
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


def run_confirm(composed: DictConfig, console: Console) -> int:
    settings: SweepSettings = OmegaConf.to_object(composed.sweep)
    options: ConfirmSettings = OmegaConf.to_object(composed.confirm)
    study = S.load_existing(settings)
    records = load_records(study)
    base = selection.baseline(records)
    chosen = confirm_finalists(records, base, options.top_k)
    if not chosen:
        raise ConfigError(f"study {settings.study!r} has no complete trial to confirm: "
                          "run the sweep first")
    orders = round_orders(chosen, options.repeats, seed=settings.seed)
    stored_runs, progress = measure_rounds(study, chosen, orders, base, settings, console)
    runs: dict[int, list[float | None]] = {
        n: [Performance.from_dict(p).tokens_per_s if p else None for p in kept_runs]
        for n, kept_runs in stored_runs.items()}
    #: Whether each run was measured under load, round by round.
    loaded = {n: [bool(p) and measured_under_load(p) for p in kept_runs]
              for n, kept_runs in stored_runs.items()}
    stored = dict(study.user_attrs.get(CONFIRM_STUDY_KEY) or {})
    summary = {}
    for r in chosen:
        measured = [v for v in runs[r.number] if v]
        if not measured:
            continue
        summary[r.number] = spread(measured)
        if base is not None and r.number != base.number and base.number in runs:
            summary[r.number]["vs_baseline"] = test_record(
                paired_test(*rounds_of(runs, r.number, base.number, loaded)))
            summary[r.number]["baseline"] = base.number
        stored[str(r.number)] = summary[r.number]
    study.set_user_attr(CONFIRM_STUDY_KEY, stored)
    study.set_user_attr(ORDER_STUDY_KEY, [[r.number for r in order] for order in orders])
    progress.finish()
    console.print(render(chosen, summary, runs, base, loaded), highlight=False,
                  soft_wrap=True, markup=False)
    under_load = sum(flag for flags in loaded.values() for flag in flags)
    if under_load:
        console.print(f"{under_load} run(s) measured under load (other processes above "
                      f"sweep.contention_cores): their rounds are left out of the paired "
                      f"tests while {MIN_CLEAN_ROUNDS} clean rounds remain", highlight=False,
                      soft_wrap=True, markup=False)
    few = too_few_rounds(summary)
    if few:
        console.print(few, highlight=False, soft_wrap=True, markup=False)
    moved = speed_change(base, summary.get(base.number) if base is not None else None)
    if moved:
        console.print(moved, highlight=False, soft_wrap=True, markup=False)
    # The one winner, now that the confirmed figures are stored: what export and soak take.
    for line in study_verdict(load_records(study), composed).lines():
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    return 0


def measure_rounds(study, chosen: list[TrialRecord], orders: list[list[TrialRecord]],
                   base: TrialRecord | None, settings: SweepSettings, console: Console
                   ) -> tuple[dict[int, list[dict | None]], ConfirmProgress]:
    """Run every round (what a stopped confirm of the same plan finished is kept, not run
    again); each finalist's stored run of each round (None: it failed), and the progress."""
    layout, runner = StudyLayout.of(settings), runner_for(settings)
    progress = ConfirmProgress.open(study, trials=[r.number for r in chosen],
                                    orders=[[r.number for r in order] for order in orders])
    total = len(orders) * len(chosen)
    kept = sum(progress.done(r.number, rep) for rep in range(len(orders)) for r in chosen)
    if progress.resumed and kept:
        console.print(f"resuming the stopped confirm: {kept} of {total} runs finished before "
                      "the stop and are kept", highlight=False)
    done = 0
    for rep, order in enumerate(orders):
        console.print(f"round {rep + 1}: trials {', '.join(str(r.number) for r in order)}",
                      highlight=False)
        for r in order:
            done += 1
            if progress.done(r.number, rep):
                continue
            role = " (baseline)" if base is not None and r.number == base.number else ""
            console.print(f"confirm {done}/{total}: trial {r.number}{role} round {rep + 1}",
                          highlight=False)
            # Stored as it finishes: a stop after it keeps it, and the rerun skips it.
            progress.store(r.number, rep, rerun(runner, r.run_dir, layout.confirm(r.number, rep),
                                                settings, name=f"confirm/{r.number}"))
    return {r.number: progress.runs(r.number) for r in chosen}, progress


#: Study attribute with the order the trials ran in, round by round.
ORDER_STUDY_KEY = "autotune.confirm_order"
#: The baseline's confirmed median over its sweep figure beyond which the machine's speed
#: is said to have changed (a factor: 1.25 = 25 % faster or slower): well beyond the
#: 5-10 % run-to-run noise of a quiet shared machine (BENCHMARKS.md, "repeatability").
SPEED_CHANGE = 1.25


def round_orders(chosen: list[TrialRecord], repeats: int, *, seed: int
                 ) -> list[list[TrialRecord]]:
    """The order of each round: the finalists shuffled anew every round (seeded)."""
    rng = np.random.default_rng(seed)
    return [[chosen[i] for i in rng.permutation(len(chosen))] for _ in range(repeats)]


#: A paired interval wider than this (a fraction: 0.1 = 10 points) on 2 rounds gets a note.
WIDE_INTERVAL = 0.10


def too_few_rounds(summary: dict) -> str | None:
    """A note when a paired test rests on 2 rounds or fewer and its interval came out wide:
    the 95 % interval is the rounds' spread times Student's t at 1 degree of freedom
    (12.7), too wide to separate gains of a few percent; None otherwise."""
    tests = [test for s in summary.values() if (test := s.get("vs_baseline"))]
    rounds = [t["rounds"] for t in tests
              if t["rounds"] <= 2 and t["high"] - t["low"] > WIDE_INTERVAL]
    if not rounds:
        return None
    from scipy.stats import t  # only here: keeps the command's start-up short

    fewest = min(rounds)
    factor = t.ppf(0.975, fewest - 1) if fewest > 1 else math.inf
    return (f"note: a paired test here rests on {fewest} round(s): its 95 % interval is "
            f"{factor:.1f} x the rounds' spread, too wide to separate gains of a few %; "
            f"5 clean rounds make it {t.ppf(0.975, 4):.1f} x (confirm.repeats=5, on a quiet "
            "host: rounds measured under load are left out)")


def speed_change(base: TrialRecord | None, confirmed: dict | None) -> str | None:
    """A note when the baseline ran at another speed here than in the sweep, or None."""
    if base is None or not confirmed or not base.tokens_per_s:
        return None
    ratio = confirmed["median"] / base.tokens_per_s
    if 1 / SPEED_CHANGE < ratio < SPEED_CHANGE:
        return None
    unit = rate(base.perf.unit, short=True)
    return (f"note: the baseline (trial {base.number}) ran at {confirmed['median']:,.0f} {unit} "
            f"here and {base.tokens_per_s:,.0f} {unit} in the sweep ({ratio:.2f}x): the "
            "machine's speed changed between them. Compare only the gains above, measured "
            "side by side within rounds; the sweep's figures were measured under other "
            "conditions.")


def render(chosen: list[TrialRecord], summary: dict[int, dict],
           runs: dict[int, list[float | None]], base: TrialRecord | None,
           loaded: dict[int, list[bool]] | None = None) -> str:
    sweep_rate = f"sweep {rate(unit_of(chosen), short=True)}"
    lines = [f"{'trial':>5}  {sweep_rate:>12}  {'median':>10}  {'min..max':>19}  "
             f"{'CV':>6}  {'vs baseline (paired t-test)':<44}  knobs"]
    ranked = sorted(chosen, key=lambda r: -(summary.get(r.number) or {}).get("median", 0))
    for r in ranked:
        s = summary.get(r.number)
        if s is None:
            lines.append(f"{r.number:>5}  {r.tokens_per_s:>12,.0f}  {'failed':>10}")
            continue
        if base is not None and r.number == base.number:
            versus = "baseline"
        else:
            test = s.get("vs_baseline")
            versus = (f"{100 * test['ratio']:+.1f} % ({100 * test['low']:+.1f}.."
                      f"{100 * test['high']:+.1f}), p={test['p_value']:.3f}"
                      f"{'' if test['real'] else ' noise'}") if test else "too few rounds"
        lines.append(f"{r.number:>5}  {r.tokens_per_s:>12,.0f}  {s['median']:>10,.0f}  "
                     f"{s['min']:>9,.0f}..{s['max']:<8,.0f}  {100 * s['cv']:>5.1f}%  "
                     f"{versus:<44}  {params_label(r.params)}")
    top = [r for r in ranked if r.number in summary][:2]
    # The top two are tested against each other only when neither is the baseline: a
    # finalist against the baseline is its row's test already.
    if len(top) == 2 and (base is None or base.number not in {r.number for r in top}):
        a, b = top
        test = paired_test(*rounds_of(runs, a.number, b.number, loaded))
        verdict = (f"{test.text()}; either is fine" if test is not None and not test.gain.real
                   else test.text() if test is not None else "too few complete rounds to test")
        lines.append(f"top two (trial {a.number} vs trial {b.number}): {verdict}")
    return "\n".join(lines)


#: What ``autotune`` says when it is stopped during a confirm.
STOPPED = ("the running re-measurement was killed; the finished ones are stored: run the "
           "same command again to run the rest")


def run(composed: DictConfig, overrides: list[str], console: Console) -> int:
    return run_confirm(composed, console)
