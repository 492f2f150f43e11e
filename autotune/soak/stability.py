"""How stable a long run was, from its step records alone; and whether a resumed run
continued the killed one's loss curve.

Used by ``python -m autotune soak`` (autotune/commands/soak.py). Pure numpy/scipy on
:class:`~trials.contract.events.StepRecord` lists: no MindSpore, no I/O, so it is
tested with synthetic records.

Definitions (each verdict line quotes its numbers):

* **loss spike**: the one rule of trials/contract/performance.py (``loss_spikes``): a
  finite loss at or above ``spike_factor`` x the median of the previous
  ``SPIKE_WINDOW`` finite losses, judged once ``SPIKE_MIN_HISTORY`` exist; the
  trainer's guard and the scorecard count by it too. Only the factor differs, passed
  explicitly: a soak looks for instability far below a divergence, so it judges at
  :data:`SPIKE_FACTOR` (1.5 x) where the guard stops a trial at ``guard.spike_factor``
  (8 x). A falling loss never trips it; a jump that the guard lets through does.
* **loss trend**: the Theil-Sen slope of the loss against the step over the run's second
  half (a run still learning falls or levels off there), as % of its median per 100
  steps with its 95 % interval. Rising: the interval is above 0 *and* the half's last
  decile is at least :data:`LOSS_RISE_PCT` % over its first (a learning rate too high
  for a long run shows here before any spike does).
* **rates**: overflow (the loss scaler saw inf/nan gradients), skipped updates
  (``updated`` false), clipped steps, non-finite losses, each over all steps.
* **steady steps**: each process's steps after its first :data:`WARMUP_SKIP` (10 %, at
  least its compile step). A process warms up (graph compile, dataset buffers,
  allocator pools) at its start, again after a resume; that is growth, not drift.
* **tokens/s drift**: the Theil-Sen slope of tokens/s against the step over the steady
  steps, as % of the median per 100 steps with its 95 % interval, and the first-decile
  vs last-decile medians. Drifting: the interval excludes 0 *and* the deciles differ by
  at least :data:`DRIFT_PCT` % in the slope's direction.
* **memory growth**: the Theil-Sen slope of the run's anonymous memory (``rss_gib``: heap
  and shared memory of its processes, PSS; trials/memory.py) against the step in
  MiB per 100 steps, with its 95 % interval, fitted *within* each process (a restart
  resets RSS: pairs across it would bias the slope) over the steady steps. A leak: the
  interval's lower bound exceeds ``leak_mib_per_100_steps``, i.e. growth is both real
  (separable from allocator noise) and large enough to matter. An injected 2 MiB/step
  leak (200 MiB/100 steps) is far above the default 20; allocator noise sits near 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from autotune.study.schema.soak import (
    LossStats,
    LossTrend,
    MemoryGrowth,
    Rates,
    ResumeCheck,
    SoakAnalysis,
    SoakFlags,
    ThroughputDrift,
)
from trials.contract import performance
from trials.contract.events import Phase, StepRecord
from trials.contract.performance import SPIKE_WINDOW
from trials.contract.units import rate

#: A soak counts a loss at or above this factor x the running median as a spike (the
#: guard's ``guard.spike_factor`` is 8: a soak is looking for smaller trouble).
SPIKE_FACTOR = 1.5
#: Share of each process's first steps left out of the drift and memory fits.
WARMUP_SKIP = 0.10
#: tokens/s drifts when the first and last deciles differ by this much (%) too.
DRIFT_PCT = 5.0
#: The loss rises when the last decile of the run's second half is this much (%) over its
#: first, with the slope's interval above 0 (a rise the eye would not call noise).
LOSS_RISE_PCT = 5.0
#: Fewer steady points than this: no slope is claimed.
MIN_FIT_POINTS = 8
#: Theil-Sen is O(n^2) in memory: longer series are thinned evenly to this many points
#: per process (fewer points widen the interval: conservative, never a false leak).
MAX_FIT_POINTS = 1500
#: Listed steps (spikes) are capped so the study attribute stays small.
MAX_LISTED = 50
MIB_PER_GIB = 1024.0


@dataclass(frozen=True)
class Slope:
    """A robust slope with its 95 % interval, in the caller's units per step."""

    slope: float
    low: float
    high: float
    points: int

    def scaled(self, factor: float) -> Slope:
        return Slope(self.slope * factor, self.low * factor, self.high * factor, self.points)


def _thin(x: np.ndarray, y: np.ndarray, limit: int = MAX_FIT_POINTS
          ) -> tuple[np.ndarray, np.ndarray]:
    if x.size <= limit:
        return x, y
    keep = np.unique(np.linspace(0, x.size - 1, limit).round().astype(int))
    return x[keep], y[keep]


def theil_sen(x: Sequence[float], y: Sequence[float]) -> Slope | None:
    """scipy's Theil-Sen slope with its 95 % interval; None below MIN_FIT_POINTS."""
    xs, ys = _thin(np.asarray(x, float), np.asarray(y, float))
    if xs.size < MIN_FIT_POINTS or np.ptp(xs) == 0:
        return None
    from scipy.stats import theilslopes  # ~1 s to import: only where a slope is fitted

    fit = theilslopes(ys, xs, alpha=0.95)
    return Slope(float(fit.slope), float(fit.low_slope), float(fit.high_slope), int(xs.size))


def _tie_term(values: np.ndarray) -> float:
    _, counts = np.unique(values, return_counts=True)
    counts = counts[counts > 1].astype(float)
    return float(np.sum(counts * (counts - 1) * (2 * counts + 5)))


def blocked_theil_sen(blocks: Sequence[tuple[Sequence[float], Sequence[float]]]
                      ) -> Slope | None:
    """Theil-Sen over several series that share a slope but not an intercept.

    The slopes of pairs *within* each block are pooled and their median taken; the
    95 % interval follows Sen (1968) as scipy.stats.theilslopes does, with the variance
    of Kendall's statistic summed over the (independent) blocks. With one block it is
    exactly scipy's estimate. None below MIN_FIT_POINTS points in all.
    """
    slopes, sigsq, points = [], 0.0, 0
    for bx, by in blocks:
        x, y = _thin(np.asarray(bx, float), np.asarray(by, float))
        n = x.size
        if n < 2:
            continue
        dx = x[:, None] - x
        dy = y[:, None] - y
        slopes.append(dy[dx > 0] / dx[dx > 0])
        sigsq += (n * (n - 1) * (2 * n + 5) - _tie_term(x) - _tie_term(y)) / 18.0
        points += n
    if points < MIN_FIT_POINTS or not slopes:
        return None
    pooled = np.sort(np.concatenate(slopes))
    if pooled.size == 0:
        return None
    z = NormalDist().inv_cdf(0.025)
    sigma = math.sqrt(max(sigsq, 0.0))
    nt = pooled.size
    upper = min(int(np.round((nt - z * sigma) / 2.0)), nt - 1)
    lower = max(int(np.round((nt + z * sigma) / 2.0)) - 1, 0)
    return Slope(float(np.median(pooled)), float(pooled[lower]), float(pooled[upper]), points)


# -- segments -------------------------------------------------------------------------------
def processes(steps: Sequence[StepRecord], restarts: Sequence[int] = ()) -> list[list[StepRecord]]:
    """The steps split where a new process took over (``restarts``: its first step)."""
    cuts = sorted(set(restarts))
    out: list[list[StepRecord]] = [[]]
    for s in steps:
        while cuts and s.step >= cuts[0]:
            cuts.pop(0)
            if out[-1]:
                out.append([])
        out[-1].append(s)
    return [seg for seg in out if seg]


def steady(segment: list[StepRecord]) -> list[StepRecord]:
    """The process's steps after its warm-up (the first WARMUP_SKIP share, at least one)."""
    skip = max(1, math.ceil(WARMUP_SKIP * len(segment)))
    return [s for s in segment[skip:] if s.phase is not Phase.COMPILE]


# -- the parts ------------------------------------------------------------------------------
def loss_spikes(steps: Sequence[StepRecord], spike_factor: float) -> list[int]:
    """The steps that are spikes by the one rule (performance.loss_spikes) at this factor."""
    return [steps[i].step for i in performance.loss_spikes([s.loss for s in steps],
                                                           spike_factor)]


def _rate(count: int, total: int) -> float:
    return count / total if total else 0.0


def _tokens_per_s(s: StepRecord, tokens_per_step: float | None) -> float | None:
    """tokens/s of one step (the definition over a single step time)."""
    return performance.tokens_per_s(tokens_per_step or s.tokens, [s.step_s])


@dataclass(frozen=True)
class Trend:
    """A series against the step: its Theil-Sen slope as % of its median per 100 steps
    (None below MIN_FIT_POINTS), and the medians of its first and last decile."""

    per100: Slope | None
    median: float
    first: float
    last: float

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.last / self.first - 1.0) if self.first > 0 else 0.0


def relative_trend(pts: Sequence[tuple[float, float]]) -> Trend:
    """:class:`Trend` of (step, value) points, in step order."""
    x = np.array([p[0] for p in pts], float)
    y = np.array([p[1] for p in pts], float)
    median = float(np.median(y))
    fit = theil_sen(x, y)
    decile = max(1, len(y) // 10)
    per100 = fit.scaled(100.0 * 100.0 / abs(median)) if fit and median else None
    return Trend(per100, median, float(np.median(y[:decile])), float(np.median(y[-decile:])))


def throughput_drift(segments: list[list[StepRecord]], tokens_per_step: float | None, *,
                     unit: str | None = None) -> ThroughputDrift:
    """tokens/s against the step over the steady steps: slope, interval, deciles."""
    pts = [(s.step, tps) for seg in segments for s in steady(seg)
           if (tps := _tokens_per_s(s, tokens_per_step)) is not None]
    if len(pts) < MIN_FIT_POINTS:
        return ThroughputDrift(judged=False, points=len(pts), drifting=False, unit=unit)
    t = relative_trend(pts)
    per100 = t.per100
    excludes_zero = per100 is not None and (per100.low > 0 or per100.high < 0)
    return ThroughputDrift(
        judged=per100 is not None, points=len(pts), median_tokens_per_s=t.median,
        drift_pct_per_100_steps=per100.slope if per100 else None,
        drift_low=per100.low if per100 else None,
        drift_high=per100.high if per100 else None,
        first_decile_tokens_per_s=t.first, last_decile_tokens_per_s=t.last,
        decile_change_pct=t.change_pct,
        # Both measures must say the same: a slope that falls while the last decile sits
        # above the first (a dip in the middle) is noise in the order of the steps, not a
        # drift either way.
        drifting=bool(excludes_zero and abs(t.change_pct) >= DRIFT_PCT
                      and (t.change_pct > 0) == (per100.slope > 0)), unit=unit)


def loss_trend(steps: Sequence[StepRecord]) -> LossTrend:
    """The loss against the step over the run's second half, where a training that is
    still learning falls or levels off: Theil-Sen slope (% of the half's median loss per
    100 steps) with its interval, and the half's first and last decile. Rising = the whole
    interval above 0 and the last decile at least LOSS_RISE_PCT over the first."""
    finite = [(s.step, s.loss) for s in steps if math.isfinite(s.loss)]
    half = finite[len(finite) // 2:]
    t = relative_trend(half) if len(half) >= MIN_FIT_POINTS else None
    if t is None or t.per100 is None:
        return LossTrend(judged=False, points=len(half), rising=False)
    per100 = t.per100
    return LossTrend(judged=True, points=len(half), from_step=int(half[0][0]),
                     to_step=int(half[-1][0]), pct_per_100_steps=per100.slope,
                     low=per100.low, high=per100.high, first_decile=t.first,
                     last_decile=t.last, change_pct=t.change_pct,
                     rising=bool(per100.low > 0 and t.change_pct >= LOSS_RISE_PCT))


def memory_growth(segments: list[list[StepRecord]], leak_mib_per_100_steps: float
                  ) -> MemoryGrowth:
    """Host RSS against the step, fitted within each process over its steady steps."""
    blocks = []
    for seg in segments:
        pts = [(s.step, s.rss_gib * MIB_PER_GIB) for s in steady(seg)
               if math.isfinite(s.rss_gib) and s.rss_gib > 0]
        if len(pts) >= 2:
            blocks.append(([p[0] for p in pts], [p[1] for p in pts]))
    rss = [s.rss_gib for seg in segments for s in seg if math.isfinite(s.rss_gib)
           and s.rss_gib > 0]
    fit = blocked_theil_sen(blocks)
    out = MemoryGrowth(judged=fit is not None, points=sum(len(b[0]) for b in blocks),
                       processes=len(blocks),
                       threshold_mib_per_100_steps=leak_mib_per_100_steps,
                       rss_first_gib=rss[0] if rss else None,
                       rss_last_gib=rss[-1] if rss else None,
                       rss_max_gib=max(rss) if rss else None, leak=False)
    if fit is None:
        return out
    per100 = fit.scaled(100.0)
    return dataclasses.replace(out, slope_mib_per_100_steps=per100.slope,
                               slope_low=per100.low, slope_high=per100.high,
                               leak=bool(per100.low > leak_mib_per_100_steps))


# -- the whole ------------------------------------------------------------------------------
def analyse(steps: Sequence[StepRecord], *, spike_factor: float = SPIKE_FACTOR,
            leak_mib_per_100_steps: float = 20.0, tokens_per_step: float | None = None,
            restarts: Sequence[int] = (), unit: str | None = None) -> SoakAnalysis:
    """Stability of one run's steps, in step order (a resumed run: the stitched curve).

    ``restarts``: the steps at which a new process took over (a resume), so that memory
    is fitted within each process and each process's warm-up is skipped.
    ``tokens_per_step``: overrides the records' own ``tokens`` (None: use them).
    ``unit``: what those count (tokens, samples), named in the verdicts.
    Its verdict lines: :func:`verdicts`.
    """
    steps = list(steps)
    n = len(steps)
    segments = processes(steps, restarts)
    spikes = loss_spikes(steps, spike_factor)
    finite = [s.loss for s in steps if math.isfinite(s.loss)]
    n_overflow = sum(1 for s in steps if s.overflow)
    n_skipped = sum(1 for s in steps if not s.updated)
    n_clipped = sum(1 for s in steps if s.clipped)
    n_nonfinite = n - len(finite)
    loss = LossStats(first=finite[0] if finite else None,
                     last=finite[-1] if finite else None, spike_factor=spike_factor,
                     spike_window=SPIKE_WINDOW, spikes=len(spikes),
                     spike_steps=spikes[:MAX_LISTED], nonfinite=n_nonfinite)
    rates = Rates(overflow=_rate(n_overflow, n), skipped_updates=_rate(n_skipped, n),
                  clipped=_rate(n_clipped, n), overflow_steps=n_overflow,
                  skipped_steps=n_skipped, clipped_steps=n_clipped)
    throughput = throughput_drift(segments, tokens_per_step, unit=unit)
    memory = memory_growth(segments, leak_mib_per_100_steps)
    trend = loss_trend(steps)
    flags = SoakFlags(spikes=bool(spikes), nonfinite=n_nonfinite > 0,
                      loss_rising=trend.rising, drift=throughput.drifting, leak=memory.leak)
    return SoakAnalysis(steps=n, first_step=steps[0].step if steps else None,
                        last_step=steps[-1].step if steps else None, loss=loss, rates=rates,
                        throughput=throughput, memory=memory, loss_trend=trend, flags=flags)


def _signed(v: float, digits: int = 1) -> str:
    return f"{v:+.{digits}f}"


def loss_trend_line(t: LossTrend) -> str:
    """The loss trend's verdict, with the numbers it rests on."""
    if not t.judged:
        return f"loss trend: too few finite losses in the second half ({t.points}) to judge"
    word = ("RISING" if t.rising else "falling" if t.high < 0 else
            f"rising slightly (under +{LOSS_RISE_PCT:g} %)" if t.low > 0 else "flat")
    return (f"loss over the second half (steps {t.from_step}-{t.to_step}): {word}: "
            f"{t.first_decile:.4g} -> {t.last_decile:.4g} "
            f"({_signed(t.change_pct)} %), {_signed(t.pct_per_100_steps, 2)} %/100 steps "
            f"(95 % CI {_signed(t.low, 2)}..{_signed(t.high, 2)}; rising = CI above 0 and "
            f"+{LOSS_RISE_PCT:g} % or more)")


def verdicts(r: SoakAnalysis) -> list[str]:
    """One line per finding, each quoting the numbers it rests on."""
    n, loss, rates = r.steps, r.loss, r.rates
    spikes = loss.spike_steps
    shown = ", ".join(str(s) for s in spikes[:5]) + (" ..." if len(spikes) > 5 else "")
    lines = [
        (f"loss spikes: {loss.spikes} in {n} steps (loss > {loss.spike_factor:g} x "
         f"median of the previous {loss.spike_window})"
         + (f" at step {shown}" if spikes else "")
         + f"; {loss.nonfinite} non-finite"),
        loss_trend_line(r.loss_trend),
        (f"overflow {100 * rates.overflow:.1f} % ({rates.overflow_steps}/{n}), "
         f"skipped updates {100 * rates.skipped_updates:.1f} % "
         f"({rates.skipped_steps}/{n}), clipped {100 * rates.clipped:.1f} %"),
    ]
    t = r.throughput
    per_s = rate(t.unit)
    if t.judged:
        lines.append(
            f"{per_s} {'DRIFTS' if t.drifting else 'steady'}: "
            f"{_signed(t.drift_pct_per_100_steps, 2)} %/100 steps (95 % CI "
            f"{_signed(t.drift_low, 2)}..{_signed(t.drift_high, 2)}), first decile "
            f"{t.first_decile_tokens_per_s:,.0f} -> last {t.last_decile_tokens_per_s:,.0f}"
            f" {rate(t.unit, short=True)} ({_signed(t.decile_change_pct)} %; "
            "drift = CI excludes 0 and the deciles move "
            f">= {DRIFT_PCT:g} % the same way)")
    else:
        lines.append(f"{per_s}: too few steady steps ({t.points}) to judge drift")
    m = r.memory
    if m.judged:
        word = "LEAK" if m.leak else "no leak"
        rule = ">" if m.leak else "<="
        lines.append(
            f"host memory: {word}: {_signed(m.slope_mib_per_100_steps)} MiB/100 steps (95 % "
            f"CI {_signed(m.slope_low)}..{_signed(m.slope_high)}); lower bound {rule} "
            f"{m.threshold_mib_per_100_steps:g} MiB/100 steps; anonymous "
            f"memory {m.rss_first_gib:.2f} -> {m.rss_last_gib:.2f} GiB")
    else:
        lines.append(f"host memory: too few steady steps with RSS ({m.points}) to judge "
                     "growth")
    return lines


# -- kill and resume ------------------------------------------------------------------------
#: The pre-kill trend is fitted over this many last losses before the resumed step...
TREND_WINDOW = 20
#: ...and the first resumed loss must lie within this many robust SDs of it.
TREND_SIGMAS = 3.0


def _rel_diff(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


@dataclass(frozen=True)
class _OnTrend:
    """The first resumed loss against the pre-kill trend (None: no trend fitted)."""

    predicted: float | None = None
    band: float | None = None
    within: bool | None = None


def _trend(before: list[StepRecord], at_step: int, first: float | None, tolerance: float
           ) -> _OnTrend:
    """The first resumed loss against a Theil-Sen line through the last pre-resume losses."""
    pts = [(s.step, s.loss) for s in before if s.step < at_step and math.isfinite(s.loss)]
    pts = pts[-TREND_WINDOW:]
    if len(pts) < 5 or first is None:
        return _OnTrend()
    x = np.array([p[0] for p in pts], float)
    y = np.array([p[1] for p in pts], float)
    from scipy.stats import theilslopes

    fit = theilslopes(y, x)
    predicted = float(fit.intercept + fit.slope * at_step)
    residuals = y - (fit.intercept + fit.slope * x)
    scale = 1.4826 * float(np.median(np.abs(residuals - np.median(residuals))))
    band = max(TREND_SIGMAS * scale, tolerance * abs(predicted))
    return _OnTrend(predicted, band, bool(abs(first - predicted) <= band))


def resume_check(before: Sequence[StepRecord], after: Sequence[StepRecord],
                 tolerance: float) -> ResumeCheck:
    """Did the resumed run (``after``) continue the killed one (``before``)?

    The resumed run restarts at its checkpoint's step, so it replays the killed run's
    steps after that checkpoint on the same data: their losses must agree within the
    relative ``tolerance`` (on a deterministic CPU run they are bit-identical). The first
    resumed loss is also held against the trend of the last losses before the
    checkpoint; when no step was replayed, that trend decides.
    """
    before, after = list(before), list(after)
    resume_step = after[0].step if after else None
    first = next((s.loss for s in after if math.isfinite(s.loss)), None)
    pairs = []
    if resume_step is not None:
        resumed = {s.step: s.loss for s in after}
        pairs = [(s.step, s.loss, resumed[s.step]) for s in before
                 if s.step >= resume_step and s.step in resumed]
    diffs = [_rel_diff(a, b) for _, a, b in pairs]
    max_diff = max(diffs) if diffs else None
    trend = (_trend(before, resume_step, first, tolerance) if resume_step is not None
             else _OnTrend())
    matched = bool(pairs) and max_diff is not None and max_diff <= tolerance
    continued = matched if pairs else bool(trend.within)
    out = ResumeCheck(resume_step=resume_step,
                      killed_last_step=before[-1].step if before else None,
                      compared=len(pairs), compared_steps=[p[0] for p in pairs][:MAX_LISTED],
                      max_rel_diff=max_diff,
                      identical=bool(pairs) and all(d == 0 for d in diffs),
                      tolerance=tolerance, matched=matched, first_resumed_loss=first,
                      trend_predicted=trend.predicted, trend_band=trend.band,
                      within_trend=trend.within, continued=continued)
    out.verdict = resume_verdict(out)
    return out


def resume_verdict(r: ResumeCheck) -> str:
    if r.resume_step is None:
        return "resume: the resumed run made no step"
    head = f"resume from step {r.resume_step}: "
    if r.compared:
        how = ("bit-identical" if r.identical else
               f"max rel diff {r.max_rel_diff:.3g}")
        head += (f"{'continued' if r.matched else 'DID NOT continue'}: "
                 f"{r.compared} replayed step(s) {how} (tolerance {r.tolerance:g})")
    else:
        head += ("no step was replayed; "
                 + ("continued" if r.continued else "DID NOT continue"))
    if r.trend_predicted is not None:
        head += (f"; first resumed loss {r.first_resumed_loss:.4f} vs pre-kill trend "
                 f"{r.trend_predicted:.4f} +- {r.trend_band:.4f}"
                 f" ({'within' if r.within_trend else 'OUTSIDE'})")
    return head
