"""Diagnosis in words: rules over trial records that say what to try next.

Each rule is a pure function of the records (plus the config values a trial's
params do not set) and returns :class:`Finding` objects: the rule, the trials it
is about, one sentence, and the numbers that sentence cites::

    findings = diagnose(records, budget_gib=8.0, config={"data.num_workers": 1})
    print(to_markdown(findings))
"""

from __future__ import annotations

import functools
import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from autotune.presentation.findings import Finding
from autotune.presentation.invocation import autotune_command
from autotune.presentation.labels import share_text as _pct
from autotune.study.contrasts import Contrast, contrasts, how_to_isolate, of_value
from autotune.study.data_bound import (
    CHEAPER_PREPROCESSING,
    DATA_KNOBS,
    data_bound_evidence,
    pipeline_cost,
)
from autotune.study.records import LOG_TAIL, TrialRecord, unit_of
from autotune.study.selection import (
    Verdict,
    baseline,
    confirmed_text,
    distinct,
    measured_tokens_per_s,
    verdict,
)
from autotune.study.story import pick_sentence
from trials.contract.outcomes import Outcome
from trials.contract.schema import CostPriors
from trials.contract.units import rate

#: MFU below this, with a micro-batch of at most SMALL_MICRO_BATCH samples: steps are too small.
MFU_LOW = 0.10
SMALL_MICRO_BATCH = 2
NOT_RUN = (Outcome.UNSUPPORTED, Outcome.INFEASIBLE, Outcome.CONFIG_ERROR)
#: The pipeline probe's step alone and the step in training are timed apart; a gap under
#: this share of the step is not told apart from the step's own run-to-run noise.
PIPELINE_NOISE = 0.05


@dataclass
class _Context:
    records: list[TrialRecord]
    budget_gib: float | None
    config: Mapping[str, Any]
    verdict: Verdict
    #: The study's pick in words (autotune/study/story.py).
    story: str
    #: Run-to-run noise of one trial's tokens/s (coefficient of variation): the width of
    #: every contrast's interval.
    cv: float = CostPriors.run_to_run_cv

    @functools.cached_property
    def contrasts(self) -> list[Contrast]:
        """The study's one-knob contrasts, found once for every rule."""
        return contrasts(self.records, cv=self.cv)

    @property
    def pick(self) -> TrialRecord | None:
        """The study's pick (what export and soak take): every rule is about that trial."""
        return self.verdict.pick

    def value(self, record: TrialRecord, key: str) -> Any:
        return record.params.get(key, self.config.get(key))

    def of(self, *reasons: Outcome) -> list[TrialRecord]:
        return [r for r in self.records if r.reason in reasons]


def _ids(records: list[TrialRecord], limit: int = 5) -> str:
    text = ", ".join(f"#{r.number}" for r in records[:limit])
    return text + (f" and {len(records) - limit} more" if len(records) > limit else "")


def _n(records: list[TrialRecord]) -> str:
    return f"{len(records)} trial{'s' if len(records) != 1 else ''}"


def _change(key: str, value: Any, factor: float) -> str:
    """``key=v -> v*factor`` when the current value is known, else ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return key
    new = max(1, round(value * factor)) if isinstance(value, int) else value * factor
    return f"{key}={value:g} -> {new:g}"




# --- rules --------------------------------------------------------------------------------

def pick_trial(ctx: _Context) -> list[Finding]:
    top = ctx.pick
    if not ctx.records:
        return [Finding("pick", (), "The study has no trials yet: run `python -m autotune "
                        "sweep` with the same overrides first.", {"trials": 0})]
    if top is None:
        return [Finding("pick", (), f"No trial finished within the memory budget "
                        f"({_n(ctx.records)}): the failure classes below say why.",
                        {"trials": len(ctx.records)})]
    nums: dict[str, float] = {"tokens_per_s": top.standing}
    parts = []
    if top.mfu is not None:
        nums["mfu"] = top.mfu
        parts.append(f"{_pct(top.mfu)} MFU")
    if top.peak_memory_gib is not None and ctx.budget_gib is not None:
        nums |= {"peak_memory_gib": top.peak_memory_gib, "budget_gib": ctx.budget_gib}
        parts.append(f"peak {top.peak_memory_gib:.2f} GiB of the {ctx.budget_gib:.2f} GiB budget")
    base = baseline(ctx.records)
    if base is not None and base.number != top.number and base.standing:
        nums["change"] = top.standing / base.standing - 1.0
        if top.vs_baseline is not None:
            nums |= {"change_low": top.vs_baseline.low, "change_high": top.vs_baseline.high}
    if top.confirmed_tokens_per_s is not None:
        nums["confirmed_median"] = top.confirmed_tokens_per_s
    fastest = ctx.verdict.best_measured
    if fastest is not None and fastest.number != top.number:
        nums["fastest_tokens_per_s"] = fastest.standing
    # The story (autotune/study/story.py) says which trial and why, as the summary does;
    # the rules below are about that trial.
    own = f" Trial #{top.number}'s own run in the sweep: {', '.join(parts)}." if parts else ""
    return [Finding("pick", (top.number,), f"{ctx.story}.{own}", nums, cause=ctx.story,
                    action=f"`{autotune_command('confirm')}` re-measures it beside the baseline; "
                           "`export` writes it as a job")]


def _data_values(ctx: _Context, record: TrialRecord) -> dict[str, Any]:
    return {k: ctx.value(record, k) for k in DATA_KNOBS if ctx.value(record, k) is not None}


def _data_advice(ctx: _Context, record: TrialRecord) -> str:
    """What to try on its data knobs (workers up to the cores, multiprocessing, a deeper
    prefetch); a change the study already made alone from this trial's values is quoted
    with its contrast instead of advised again."""
    cores = int(ctx.config.get("machine.cores") or os.cpu_count() or 1)
    workers = ctx.value(record, "data.num_workers")
    prefetch = ctx.value(record, "data.prefetch")
    changes = []  # (knob, value, what it is)
    if isinstance(workers, int) and workers < cores:
        changes.append(("data.num_workers", min(cores, 2 * workers),
                        f"more dataset workers (data.num_workers={workers} -> "
                        f"{min(cores, 2 * workers)}, at most the {cores} cores)"))
    if ctx.value(record, "data.multiprocessing") is False:
        changes.append(("data.multiprocessing", True, "worker processes instead of threads for "
                        "Python work (data.multiprocessing=true)"))
    if isinstance(prefetch, int) and not isinstance(prefetch, bool):
        changes.append(("data.prefetch", 2 * prefetch,
                        f"{_change('data.prefetch', prefetch, 2)} (a deeper prefetch)"))
    found = ctx.contrasts
    tries, tried = [], []
    for knob, value, text in changes:
        done = [c for c in of_value(found, knob, value)
                if repr(c.other) == repr(ctx.value(record, knob))]
        (tried if done else tries).append(f"{knob}={value} was tried: {done[0].text()}"
                                          if done else text)
    advice = "; ".join(tries + [CHEAPER_PREPROCESSING])
    return advice + (f" ({'; '.join(tried)})" if tried else "")


def data_bound(ctx: _Context) -> list[Finding]:
    """Opens the diagnosis: the baseline (else the pick) is input-bound, and what fixed it."""
    base = baseline(ctx.records)
    subject = next((r for r in (base, ctx.pick) if r is not None and r.ok
                    and data_bound_evidence(r)), None)
    if subject is None:
        return []
    why, nums = data_bound_evidence(subject)
    who = "The baseline" if base is not None and subject.number == base.number else "Trial"
    head = f"{who} (trial #{subject.number}) is data-bound: it {why}."
    top = ctx.pick
    changed = {} if top is None else {k: v for k, v in _data_values(ctx, top).items()
                                      if v != ctx.value(subject, k)}
    if top is not None and top.number != subject.number and changed and top.standing \
            and subject.standing and top.standing > subject.standing:
        # One gain, with its interval where it was measured against the baseline.
        paired = top.vs_baseline if subject is base else None
        gain = paired.ratio if paired is not None else top.standing / subject.standing - 1.0
        nums["fix_change"] = gain
        # Every knob the two differ in, data or not: the gain is theirs together.
        knobs = ", ".join(f"{k}={v}" for k, v in sorted(top.params.items())
                          if repr(v) != repr(ctx.value(subject, k)))
        tail = (f" Trial #{top.number} fixed it with {knobs}: "
                + (paired.text() if paired is not None else f"{100 * gain:+.1f} %"))
        if top.confirmed_tokens_per_s is not None:
            tail += f", confirmed {confirmed_text(top)}"
        rest = data_bound_evidence(top)
        tail += (f"; it is still data-bound ({rest[0]}): try {_data_advice(ctx, top)}."
                 if rest else ".")
    else:
        tail = (f" No trial fixed it by its data knobs: try {_data_advice(ctx, subject)} "
                "(`search=data` sweeps them).")
    return [Finding("data_bound", (subject.number,), head + tail, nums)]


def pipeline(ctx: _Context) -> list[Finding]:
    """What the input pipeline costs the step, by the pipeline probe of the baseline (else
    the pick): the step trained against the step alone, fed one batch again and again on
    the same process. Said whether it costs something or nothing; a data-bound run is
    :func:`data_bound`'s to open with."""
    base = baseline(ctx.records)
    subject = next((r for r in (base, ctx.pick) if r is not None and r.ok), None)
    if subject is None or data_bound_evidence(subject):
        return []
    cost = pipeline_cost(subject.perf)
    if cost is None:
        return []
    train, alone = subject.perf.samples_per_s, subject.perf.compute_samples_per_s
    nums = {"pipeline_cost_share": cost, "samples_per_s": train, "compute_samples_per_s": alone}
    measured = (f"trial #{subject.number} trained at {train:,.1f} samples/s, "
                f"{train / alone:.2f} x its step alone ({alone:,.1f} samples/s, the pipeline "
                "probe)")
    if cost < PIPELINE_NOISE:
        return [Finding("pipeline", (subject.number,), (
            f"The input pipeline costs nothing measurable: {measured}; a gap under "
            f"{_pct(PIPELINE_NOISE)} is the step's own noise."), nums, cause=measured,
            action="nothing to change")]
    advice = _data_advice(ctx, subject)
    return [Finding("pipeline", (subject.number,), (
        f"The input pipeline costs {_pct(cost)} of the step, on time but sharing the cores: "
        f"{measured}, with little data wait. What reduces it: {advice}."), nums,
        cause=f"the pipeline's workers share the cores with the step: {measured}",
        action=advice)]


def low_mfu(ctx: _Context) -> list[Finding]:
    top = ctx.pick
    if (top is None or top.mfu is None or top.mfu >= MFU_LOW or top.micro_batch_size is None
            or top.micro_batch_size > SMALL_MICRO_BATCH):
        return []
    micro = ctx.value(top, "train.micro_batches")
    fix = (f"fewer gradient-accumulation steps ({_change('train.micro_batches', micro, 0.5)})"
           if isinstance(micro, int) and micro > 1 else
           "a larger train.global_batch (re-tune the learning rate with it)")
    return [Finding("low_mfu", (top.number,), (
        f"Trial #{top.number} reaches only {_pct(top.mfu)} MFU (below {_pct(MFU_LOW)}) with a "
        f"micro-batch of {top.micro_batch_size} samples: a larger micro-batch gives each step "
        f"more work per kernel launch; try {fix}."),
        {"mfu": top.mfu, "micro_batch_size": top.micro_batch_size})]


def diverged_fp16(ctx: _Context) -> list[Finding]:
    hit = [r for r in ctx.of(Outcome.DIVERGED) if ctx.value(r, "precision") == "fp16"]
    if not hit:
        return []
    nonfinite = sum(r.card.correctness.nonfinite_steps for r in hit)
    overflow = sum(r.card.stability.overflow_steps for r in hit)
    bf16 = ("" if ctx.config.get("hardware.supports.bf16") is not False else
            "; this hardware profile has no bf16, so loss scaling is the way here")
    return [Finding("diverged_fp16", tuple(r.number for r in hit), (
        f"{_n(hit)} diverged in fp16 ({_ids(hit)}; {nonfinite} non-finite loss steps, "
        f"{overflow} overflow steps): use dynamic loss scaling "
        f"(precision.loss_scale=dynamic, a lower precision.init_scale) or precision=bf16 where "
        f"the hardware supports it{bf16}."),
        {"trials": len(hit), "nonfinite_steps": nonfinite, "overflow_steps": overflow})]


def diverged(ctx: _Context) -> list[Finding]:
    hit = [r for r in ctx.of(Outcome.DIVERGED) if ctx.value(r, "precision") != "fp16"]
    if not hit:
        return []
    norms = [g for r in hit if (g := r.card.correctness.grad_norm_max) is not None]
    spikes = sum(r.card.stability.loss_spikes for r in hit)
    nums = {"trials": len(hit), "loss_spikes": spikes}
    seen = f"{spikes} loss spikes"
    if norms:
        nums["grad_norm_max"] = max(norms)
        seen += f", grad norm up to {max(norms):.3g}"
    precisions = "/".join(sorted({str(ctx.value(r, "precision") or "?") for r in hit}))
    lr = _change("train.lr", ctx.config.get("train.lr"), 0.5)
    clip = _change("train.clip_norm", ctx.config.get("train.clip_norm"), 0.5)
    return [Finding("diverged", tuple(r.number for r in hit), (
        f"{_n(hit)} diverged in {precisions} ({_ids(hit)}; {seen}): lower the learning rate "
        f"({lr}) or clip gradients harder ({clip})."), nums)]


def oom(ctx: _Context) -> list[Finding]:
    hit = ctx.of(Outcome.OOM)
    if not hit:
        return []
    nums: dict[str, float] = {"trials": len(hit)}
    facts = []
    peaks = [r.peak_memory_gib for r in hit if r.peak_memory_gib is not None]
    if peaks and ctx.budget_gib is not None:
        nums |= {"peak_memory_gib": max(peaks), "budget_gib": ctx.budget_gib}
        facts.append(f"peak up to {max(peaks):.2f} GiB against the {ctx.budget_gib:.2f} GiB "
                     "budget")
    sizes = sorted({r.micro_batch_size for r in hit if r.micro_batch_size is not None})
    if sizes:
        nums["micro_batch_size"] = max(sizes)
        facts.append(f"micro-batch of {'/'.join(map(str, sizes))} samples")
    blame, counts = _blame(ctx, hit)
    nums |= counts
    facts += blame
    micro = [m for r in hit if isinstance(m := ctx.value(r, "train.micro_batches"), int)]
    accumulate = _change("train.micro_batches", max(micro) if micro else None, 2)
    # True: a study from before recompute had modes.
    recompute = ("recompute (train.recompute=full)"
                 if not all(ctx.value(r, "train.recompute") in ("full", True) for r in hit)
                 else "a higher runtime.memory_optimize_level (recompute was already on)")
    action = (f"use a smaller micro-batch through more gradient accumulation ({accumulate}), "
              f"or {recompute}")
    return [Finding("oom", tuple(r.number for r in hit), (
        f"{_n(hit)} ran out of memory ({_ids(hit)}{'; ' if facts else ''}{'; '.join(facts)}): "
        f"{action}."), nums, cause="; ".join(blame), action=action)]


def hang(ctx: _Context) -> list[Finding]:
    cfg = ctx.config.get
    workers = f"data.num_workers={cfg('data.num_workers', '?')}"
    cases = (  # (rule, trials, what happened, what to check)
        ("hang", [r for r in ctx.of(Outcome.HANG) if not r.scorecard],
         "hung before the first step finished",
         "the graph compile may need more than the compile budget (sweep.stop.compile_timeout_s"
         f"={cfg('sweep.stop.compile_timeout_s', '?')}), or the dataset workers never "
         f"delivered a batch ({workers})"),
        ("hang", [r for r in ctx.of(Outcome.HANG) if r.scorecard], "stalled mid-run",
         f"check the dataset workers ({workers}) and the step budget "
         f"(sweep.stop.step_timeout_s={cfg('sweep.stop.step_timeout_s', '?')})"),
        ("timeout", ctx.of(Outcome.TIMEOUT), "ran past the wall-clock cap",
         f"check the compile budget and the dataset workers ({workers}), or raise "
         f"sweep.stop.wall_timeout_s={cfg('sweep.stop.wall_timeout_s', '?')}"),
    )
    out = []
    for rule, hit, what, advice in cases:
        if hit:
            walls = [r.wall_s for r in hit if r.wall_s is not None]
            killed = f"; killed after {max(walls):.0f} s" if walls else ""
            nums = {"trials": len(hit)} | ({"wall_s": max(walls)} if walls else {})
            out.append(Finding(rule, tuple(r.number for r in hit),
                               f"{_n(hit)} {what} ({_ids(hit)}{killed}): {advice}.", nums))
    return out


def _blame(ctx: _Context, hit: list[TrialRecord]) -> tuple[list[str], dict[str, float]]:
    """What the study's one-knob contrasts say of the knob values the ``hit`` trials carry
    and the pick (else the baseline) lacks: the values that stopped them, each with its
    contrast against a trial that completed; the values measured alone to be noise; and
    the rest, never isolated, named only as untested alongside
    (autotune/study/contrasts.py). Nothing to compare with, nothing said."""
    against = ctx.pick or baseline(ctx.records)
    if against is None:
        return [], {}
    found = ctx.contrasts
    numbers = {r.number for r in hit}
    carried = sorted({(k, repr(v)): (k, v) for r in hit for k, v in r.params.items()
                      if repr(v) != repr(against.params.get(k))}.values(), key=repr)
    causes, further, cleared, untested = [], [], [], []
    for knob, value in carried:
        isolating = of_value(found, knob, value)
        harmful = [c for c in isolating if c.slower]
        # A cause of the stop turns a trial that completed into one of these stopped ones.
        stopping = [c for c in harmful if c.trial.number in numbers and c.reference.ok]
        if stopping:
            more = f"; {len(stopping) - 1} more such pair(s)" if len(stopping) > 1 else ""
            causes.append(f"{knob}={value} did it: {stopping[0].text()}{more}")
        elif harmful:
            further.append(f"{knob}={value} ({harmful[0].text()})")
        elif isolating:
            cleared.append(f"{knob}={value} ({isolating[0].text()})")
        else:
            untested.append(f"{knob}={value}")
    parts = list(causes)
    if further:
        parts.append("slower alone, but not what stopped them: " + "; ".join(further))
    if cleared:
        parts.append("measured alone, not a cause: " + "; ".join(cleared))
    if untested:
        parts.append(f"untested alongside, never changed alone: {', '.join(untested)} "
                     f"(no pair of trials isolates {'it' if len(untested) == 1 else 'them'}: "
                     f"{how_to_isolate()})")
    return parts, {"causes": len(causes), "cleared": len(cleared), "not_isolated": len(untested)}


def slow(ctx: _Context) -> list[Finding]:
    hit = ctx.of(Outcome.SLOW)
    top = ctx.pick
    if not hit:
        return []
    nums: dict[str, float] = {"trials": len(hit)}
    seen = ""
    partial = [v for r in hit if (v := measured_tokens_per_s(r)) is not None]
    if partial:
        nums["median_tokens_per_s"] = statistics.median(partial)
        seen = (f"; {nums['median_tokens_per_s']:,.0f} {rate(unit_of(ctx.records))} median when "
                "stopped")
        if top is not None:
            nums["ratio"] = nums["median_tokens_per_s"] / top.standing
            seen += f", {nums['ratio']:.2f} x the pick's {top.standing:,.0f} in the sweep"
    parts, counts = _blame(ctx, hit)
    nums |= counts
    tail = "; ".join(parts) or "they carry no knob value the pick lacks: no knob explains it"
    action = ("leave the values that did it out of the space (the slow rule stops them "
              "anyway, at a cost)" if counts.get("causes") else
              how_to_isolate() if counts.get("not_isolated") else "nothing to change")
    return [Finding("slow", tuple(r.number for r in hit),
                    f"{_n(hit)} stopped as slow ({_ids(hit)}{seen}): {tail}.", nums,
                    cause=tail, action=action)]


def _last_log_line(tail: str) -> str:
    """The last line of stderr in a log tail (headers ``--- name`` separate the files)."""
    chunks: dict[str, list[str]] = {}
    name = "log"
    for line in tail.splitlines():
        if line.startswith("--- "):
            name = line[4:].strip()
            continue
        if line.strip():
            chunks.setdefault(name, []).append(line.strip())
    lines = chunks.get("stderr.log") or next(reversed(chunks.values()), [])
    return lines[-1][:200] if lines else ""


def crash(ctx: _Context, *, limit: int = 3) -> list[Finding]:
    out = []
    for r in ctx.of(Outcome.CRASH)[:limit]:
        where = f"{r.trial_dir}/stderr.log" if r.trial_dir else "its trial directory"
        last = _last_log_line(str(r.attrs.get(LOG_TAIL) or ""))
        ended = f'its log ends with "{last}"' if last else "it left no log output"
        after = f" after {r.wall_s:.1f} s" if r.wall_s is not None else ""
        out.append(Finding("crash", (r.number,), (
            f"Trial #{r.number} crashed{after} ({r.detail or 'no detail'}): {ended}; the full "
            f"log is in {where}."), {"wall_s": r.wall_s} if r.wall_s is not None else {}))
    return out


def not_run(ctx: _Context) -> list[Finding]:
    out = []
    for reason in NOT_RUN:
        hit = ctx.of(reason)
        if hit:
            out.append(Finding("not_run", tuple(r.number for r in hit), (
                f"{_n(hit)} ended as {reason.value} ({_ids(hit)}): {reason.label}; e.g. trial "
                f"#{hit[0].number}: {hit[0].detail or 'no detail'}."), {"trials": len(hit)}))
    return out


RULES: tuple[Callable[[_Context], list[Finding]], ...] = (
    data_bound, pipeline, pick_trial, low_mfu, diverged_fp16, diverged, oom, hang, slow, crash,
    not_run)


def diagnose(records: list[TrialRecord], *, budget_gib: float | None = None,
             config: Mapping[str, Any] | None = None,
             study_verdict: Verdict | None = None) -> list[Finding]:
    """Every rule's findings, the pick first, then one or more per failure class.

    ``config`` maps override paths (``data.num_workers``, ``train.lr``, ``precision``,
    ``sweep.stop.compile_timeout_s``, ...) to the values trials used where their params
    do not say; suggestions quote them. ``study_verdict``: the study's
    :func:`~autotune.study.selection.verdict` (the rules are about its pick); by default
    computed with export's default options and the default run-to-run noise prior.
    """
    if study_verdict is None:
        study_verdict = verdict(records, prior_cv=CostPriors.run_to_run_cv,
                                budget_gib=budget_gib)
    config = dict(config or {})
    ctx = _Context(distinct(records), budget_gib, config, study_verdict,
                   pick_sentence(study_verdict, records),
                   float(config.get("hardware.cost.run_to_run_cv", CostPriors.run_to_run_cv)))
    return [finding for rule in RULES for finding in rule(ctx)]

