"""Is a difference real? Gains with intervals, and the test ``confirm`` decides by.

Two kinds of noise hide a gain on a shared machine:

- **within a run**, step times scatter: a bootstrap of each run's step time
  (:mod:`trials.contract.stats`) covers it;
- **between runs**, each process settles at its own speed (on this 2-core VM,
  320-385 ms per step for one configuration; BENCHMARKS.md "repeatability"). One run
  cannot show it, so its size comes from the study's own repeats (racing, confirm)
  where there are enough, else from the hardware profile's ``cost.run_to_run_cv``.

A gain is ``candidate tokens/s / reference tokens/s - 1``. It counts as real only
when its 95 % interval excludes zero; otherwise the user reads "within noise" and
the interval that makes it so.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autotune.study.conditions import Conditions
from autotune.study.records import TrialRecord, baseline, conditions_of
from trials.contract.outcomes import Outcome
from trials.contract.performance import Performance, pooled_tokens_per_s, positive_times
from trials.contract.performance import tokens_per_s as tokens_per_s_of
from trials.contract.stats import CONFIDENCE, N_BOOT, SEED, bootstrap_step_times

#: Degrees of freedom of the study's repeats before their run-to-run CV replaces the prior.
MIN_REPEAT_DOF = 4


@dataclass(frozen=True)
class Run:
    """One measured run of a configuration: tokens per step, its measured step times,
    whether other processes loaded the host while it ran (:func:`alike`), and the least
    share of its quiet speed that load can have left it (1 when quiet:
    :meth:`Conditions.speed_left`, the slow rule's bound)."""

    tokens_per_step: float
    step_times_s: tuple[float, ...]
    loaded: bool = False
    speed_left: float = 1.0

    @property
    def tokens_per_s(self) -> float:
        return tokens_per_s_of(self.tokens_per_step, self.step_times_s)


@dataclass(frozen=True)
class Noise:
    """Run-to-run coefficient of variation of tokens/s, and where it comes from."""

    cv: float
    source: str
    #: Degrees of freedom of the runs ``cv`` was estimated from; None where it is taken as
    #: known (the hardware profile's prior).
    dof: int | None = None
    #: The noise a comparison of runs measured under load is built with (:func:`under_load`),
    #: where the study shows a larger one; :func:`compare` takes it whenever it compares
    #: loaded runs, so that a race, a gain and a pick judge one pair of trials alike.
    loaded: Noise | None = None

    @property
    def interval_cv(self) -> float:
        """The CV every 95 % interval is built with: ``cv`` widened by the uncertainty of
        its own estimate (Student's t with ``dof`` degrees of freedom over the normal
        quantile: 1.42x at 4, 1.11x at 12, 1.04x at 30). An estimate from a few repeats
        comes out low often (from 4 degrees of freedom, below half the true CV about one
        time in eleven); taken as known, two equal configurations read as separable about
        one time in seven instead of one in twenty (tests/study/test_noise.py). The
        profile's prior has no degrees of freedom: it is taken as known."""
        if not self.dof:
            return self.cv
        return self.cv * _t_over_normal(self.dof)


@dataclass(frozen=True)
class Gain:
    """candidate / reference - 1, with its 95 % interval."""

    ratio: float
    low: float
    high: float
    method: str

    @property
    def real(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def better(self) -> bool:
        """Really faster than the reference."""
        return self.low > 0

    def interval(self) -> str:
        return f"{percent(self.low, 1)}..{percent(self.high, 1)} %"

    def text(self) -> str:
        """'+12.3 % (95 % CI +4.1..+20.5 %)', or '+2.1 %: within noise (95 % CI ...)'."""
        verdict = "" if self.real else ": within noise"
        return f"{percent(self.ratio, 1)} %{verdict} (95 % CI {self.interval()})"

    def short(self) -> str:
        """For a table cell: '+12% (+4..+21)', or '~+2% (-5..+9)' within noise."""
        mark = "" if self.real else "~"
        return (f"{mark}{percent(self.ratio, 0)}% "
                f"({percent(self.low, 0)}..{percent(self.high, 0)})")


def percent(fraction: float, digits: int) -> str:
    """A signed percentage; one that rounds to zero reads +0, never -0."""
    return f"{round(100 * fraction, digits) + 0.0:+.{digits}f}"


def runs_of(record: TrialRecord) -> list[Run]:
    """The trial's runs measured during the sweep: its own, then its racing re-runs and
    (the baseline) its re-measurements; confirm's runs are not pooled with them."""
    return runs_from(record.sweep_runs(), conditions=record.sweep_run_conditions())


def comparable_runs(a: TrialRecord, b: TrialRecord) -> tuple[list[Run], list[Run]]:
    """The runs of ``a`` and ``b`` measured under the same conditions: both sides'
    ``confirm`` runs (interleaved in the same rounds) where both have them, else their
    sweep runs."""
    ca, cb = runs_from(a.confirm_runs()), runs_from(b.confirm_runs())
    if ca and cb:
        return ca, cb
    return runs_of(a), runs_of(b)


def runs_from(perfs: list[Performance | dict],
              conditions: list[Conditions | None] | None = None) -> list[Run]:
    """Runs from performance layers (a scorecard's, or a stored repeat or a re-run's, whose
    ``conditions`` say whether it ran under load); ``conditions``, where given, are each
    one's."""
    out = []
    for i, perf in enumerate(perfs):
        p = perf if isinstance(perf, Performance) else Performance.from_dict(perf)
        host = (conditions[i] if conditions is not None
                else conditions_of(perf) if isinstance(perf, dict) else None)
        loaded = host is not None and host.contended
        times = tuple(positive_times(p.step_times_s))
        if times and p.tokens_per_step:
            left = (host.speed_left() if loaded else None) or 1.0
            out.append(Run(float(p.tokens_per_step), times, loaded, left))
    return out


def alike(candidate: list[Run], reference: list[Run]) -> tuple[list[Run], list[Run]]:
    """Each side's runs measured under the same conditions as the other's: the quiet runs
    of both where each side has one, else the loaded runs of both, else all (nothing
    alike to compare). A load that came and went between two sides' runs moves one side
    only: pooled, it reads as a gain (the baseline run in a hog's on-phases and its rival in
    the off-phases read +32 %, "separable", on a host where the two run alike)."""
    for loaded in (False, True):
        c = [r for r in candidate if r.loaded == loaded]
        ref = [r for r in reference if r.loaded == loaded]
        if c and ref:
            return c, ref
    return candidate, reference


def run_to_run_noise(records: list[TrialRecord], prior_cv: float, *,
                     racing: dict[int, list[Run]] | None = None) -> Noise:
    """The pooled run-to-run CV of the study's repeated configurations, or the prior. Each
    set of runs measured together counts on its own (a configuration's sweep runs, its
    confirm runs): a speed that drifted between the sweep and ``confirm`` is not noise.
    Runs measured under load are left out (:meth:`TrialRecord.quiet_run_sets`): they are
    widened on their own (:func:`under_load`). ``racing``: a race's runs so far, by trial
    (each trial's sweep runs and the race's): they stand for those trials' sweep runs, so
    that a race measures the noise as it goes. A race begun at the profile's prior (5 % on
    a CPU) on a landscape whose runs spread 13.5 % otherwise judged every round at 5 %,
    and dropped the optimum as separably slower after one round."""
    sum_sq, dof = 0.0, 0
    sets = _quiet_sets(records, racing or {})
    for runs in sets:
        if len(runs) >= 2:
            logs = np.log([r.tokens_per_s for r in runs])
            sum_sq += float(np.sum((logs - logs.mean()) ** 2))
            dof += len(runs) - 1
    if dof >= MIN_REPEAT_DOF:
        configs = sum(1 for runs in sets if len(runs) >= 2)
        return _with_load(Noise(math.sqrt(sum_sq / dof), f"measured from {dof + configs} runs "
                                "of repeated configurations, runs under load left out", dof),
                          records, racing)
    # Repeated configurations' runs measured under load, which the estimate leaves out.
    loaded = sum(len(record.sweep_runs()) - len(record.quiet_run_sets()[0])
                 for record in records if len(record.sweep_runs()) > 1)
    why = (f"too few quiet repeats to measure it: {loaded} run(s) under load left out"
           if loaded else "too few repeats to measure it")
    return _with_load(Noise(prior_cv, f"the hardware profile's cost.run_to_run_cv ({why})"),
                      records, racing)


def _with_load(level: Noise, records: list[TrialRecord],
               racing: dict[int, list[Run]] | None = None) -> Noise:
    """``level`` with the noise of loaded runs (:func:`under_load`) the study shows: the
    baseline's runs, a race's too while it races (a race under load judged its rounds at
    the baseline's spread from before it, 6.6 %, and dropped a rival that its own runs,
    10.5 %, left within noise)."""
    base = baseline(records)
    if base is None or not _any_loaded(records, racing or {}):
        return level  # nothing measured under load: compare would never take it
    loaded = under_load(level, base, (racing or {}).get(base.number))
    return level if loaded is level else dataclasses.replace(level, loaded=loaded)


def _any_loaded(records: list[TrialRecord], racing: dict[int, list[Run]]) -> bool:
    """Whether the study holds a run measured under load: a trial's sweep runs or a race's
    runs so far."""
    return (any(loaded for rec in records for loaded in rec.sweep_run_loads())
            or any(r.loaded for runs in racing.values() for r in runs))


def step_spread(records: list[TrialRecord]) -> float:
    """The within-run CV of step times the study's completed runs show (their median; 0
    with none). A running trial's first few steps cannot show the spread of its steps: on
    the recorded image_cnn landscape, graph-mode periods alternate between ~23 ms and
    60-110 ms in runs of several steps, and two steps at the slow level read as a run at
    half its speed with a tight interval. The slow rule widens such an interval to what
    steps spread as much as the study's runs do would give (autotune/running/pruning.py)."""
    cvs = [r.perf.step_time_cv for r in records
           if r.reason is Outcome.OK and r.perf.step_time_cv is not None]
    return float(np.median(cvs)) if cvs else 0.0


def under_load(level: Noise, base: TrialRecord, runs: list[Run] | None = None) -> Noise:
    """The noise to assume for a run measured under other processes' load: the larger of
    ``level`` and the baseline's own run-to-run CV (its runs spread across the study's
    conditions; ``runs``, where given, are them), however few its runs: one loaded run
    says little, so it claims less."""
    runs = runs_of(base) if runs is None else runs
    if len(runs) < 2:
        return level
    logs = np.log([r.tokens_per_s for r in runs])
    cv = float(np.std(logs, ddof=1))
    if cv <= level.cv:
        return level
    return Noise(cv, f"measured under load: the baseline's own spread over {len(runs)} "
                     f"runs, above the {100 * level.cv:.1f} % of quiet runs", len(runs) - 1)


@lru_cache(maxsize=256)
def _t_over_normal(dof: int) -> float:
    """Student's t quantile over the normal one, both at :data:`CONFIDENCE` (two-sided)."""
    from scipy import stats

    q = 0.5 + CONFIDENCE / 2
    return float(stats.t.ppf(q, dof) / stats.norm.ppf(q))


def _quiet_sets(records: list[TrialRecord], racing: dict[int, list[Run]]) -> list[list[Run]]:
    """Every set of quiet runs measured together: each trial's sweep runs (a race's, where
    it is racing) and its confirm runs."""
    out = []
    for record in records:
        sweep, confirm = (runs_from(perfs) for perfs in record.quiet_run_sets())
        raced = racing.get(record.number)
        out += [sweep if raced is None else [r for r in raced if not r.loaded], confirm]
    known = {record.number for record in records}
    out += [[r for r in runs if not r.loaded] for number, runs in racing.items()
            if number not in known]
    return out


@lru_cache(maxsize=4096)
def _log_tps_draws(run: Run) -> np.ndarray:
    """log tokens/s of ``N_BOOT`` resamples of one run's steps (seeded per run): the
    definition of tokens/s (tokens per step / step time) over each resample."""
    seed = SEED + hash(run.step_times_s) % 1_000_000
    draws = bootstrap_step_times(run.step_times_s, rng=np.random.default_rng(seed))
    return np.log(run.tokens_per_step / draws)


def _side(runs: list[Run]) -> tuple[float, np.ndarray]:
    """(log of the geometric mean of the runs' tokens/s, its bootstrap draws)."""
    draws = np.mean([_log_tps_draws(r) for r in runs], axis=0)
    point = math.log(pooled_tokens_per_s(r.tokens_per_s for r in runs))
    return point, draws


def compare(candidate: list[Run], reference: list[Run], noise: Noise) -> Gain | None:
    """The gain of ``candidate`` over ``reference`` on their runs measured alike
    (:func:`alike`): bootstrap over each run's steps, plus run-to-run noise of ``noise.cv``
    for each side's mean of runs."""
    if not candidate or not reference:
        return None
    candidate, reference = alike(candidate, reference)
    if noise.loaded is not None and any(r.loaded for r in (*candidate, *reference)):
        noise = noise.loaded
    c_point, c_draws = _side(candidate)
    r_point, r_draws = _side(reference)
    rng = np.random.default_rng(SEED)
    spread = noise.interval_cv * math.sqrt(1 / len(candidate) + 1 / len(reference))
    log_ratio = c_draws - r_draws + rng.normal(0.0, spread, size=N_BOOT)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(log_ratio, [tail, 100 - tail])
    method = (f"bootstrap over steps ({len(candidate)} vs {len(reference)} run(s)) + "
              f"run-to-run noise {100 * noise.cv:.1f} % ({noise.source}"
              + (f"; widened to {100 * noise.interval_cv:.1f} % for an estimate from "
                 f"{noise.dof} degrees of freedom" if noise.dof else "") + ")")
    if any(r.loaded for r in candidate) != any(r.loaded for r in reference):
        # No runs of the two measured alike: one side ran under a load the other did not
        # meet. A load only slows, so each side may be as much faster than it read as its
        # load could take (a baseline measured under 0.7 other cores against a quiet trial
        # read +42 %, "separable"; confirm measured +1.6 %).
        low += _load_bound(reference)
        high -= _load_bound(candidate)
        method += "; widened by what the load on one side's runs alone could take"
    return Gain(math.exp(c_point - r_point) - 1, math.expm1(low), math.expm1(high), method)


def _load_bound(runs: list[Run]) -> float:
    """The log of the least share of their quiet speed the runs' loads can have left their
    pooled (geometric mean) tokens/s: 0 for quiet runs, negative under load."""
    return float(np.mean([math.log(r.speed_left) for r in runs]))


def separably_slower(runs: dict[int, list[Run]], noise: Noise) -> dict[int, int]:
    """The trials (keys of ``runs``) some other one is separably faster than, each side on
    all its runs (:func:`compare`), each with the first such other: what a race drops
    after a round, and says it is slower than."""
    slower: dict[int, int] = {}
    for e in runs:
        for other in runs:
            if other != e and (g := compare(runs[other], runs[e], noise)) is not None \
                    and g.better:
                slower[e] = other
                break
    return slower


def gain(candidate: TrialRecord, reference: TrialRecord, noise: Noise) -> Gain | None:
    """``candidate`` over ``reference`` on runs measured under the same conditions
    (:func:`comparable_runs`)."""
    return compare(*comparable_runs(candidate, reference), noise)


@dataclass(frozen=True)
class PairedTest:
    """Paired t-test on log tokens/s over interleaved rounds (confirm)."""

    gain: Gain
    p_value: float
    rounds: int

    def text(self) -> str:
        verdict = "separable" if self.gain.real else "NOT separable (within noise)"
        return (f"{percent(self.gain.ratio, 1)} % (95 % CI {self.gain.interval()}, "
                f"p = {self.p_value:.3f}, {self.rounds} paired rounds): {verdict}")


def paired_test(candidate: list[float], reference: list[float]) -> PairedTest | None:
    """Rounds i pair ``candidate[i]`` with ``reference[i]`` (tokens/s measured side by side,
    so drift of the machine cancels). None with fewer than 2 complete rounds."""
    from scipy import stats

    pairs = [(c, r) for c, r in zip(candidate, reference) if c and r and c > 0 and r > 0]
    if len(pairs) < 2:
        return None
    d = np.log([c for c, _ in pairs]) - np.log([r for _, r in pairs])
    n, mean = len(d), float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0:
        p = 0.0 if mean != 0 else 1.0
        half = 0.0
    else:
        se = sd / math.sqrt(n)
        p = float(2 * stats.t.sf(abs(mean / se), n - 1))
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * se)
    g = Gain(math.expm1(mean), math.expm1(mean - half), math.expm1(mean + half),
             f"paired t-test on log tokens/s over {n} interleaved rounds")
    return PairedTest(g, p, n)
