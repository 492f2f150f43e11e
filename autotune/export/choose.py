"""Which trial to export: a named one, else the fastest (confirmed where ``confirm`` ran),
else for Pareto studies the fastest with enough memory headroom; then, among the
configurations the fastest is not separable from, the one with the fewest changes from
the baseline (the baseline itself when the winner's gain is within noise)."""

from __future__ import annotations

import optuna

from autotune.settings import ExportSettings
from autotune.study import noise, selection
from autotune.study.records import TrialRecord
from trials.contract.schema import ConfigError


def choose_trial(study: optuna.Study, records: list[TrialRecord],
                 options: ExportSettings, *, prior_cv: float) -> tuple[TrialRecord, str]:
    """(record, why it was chosen). ConfigError when nothing qualifies."""
    by_number = {r.number: r for r in records}
    if options.trial is not None:
        record = by_number.get(options.trial)
        if record is None:
            raise ConfigError(f"export.trial={options.trial}: no such trial in study "
                              f"{study.study_name!r} (0..{len(records) - 1})")
        if record.reused_from is not None:
            record = by_number[record.reused_from]
        return record, f"trial {options.trial} as requested"
    candidates = selection.feasible_records(records, None,
                                            min_headroom_gib=options.min_headroom_gib)
    if not candidates:
        raise ConfigError(f"study {study.study_name!r} has no complete trial within the memory "
                          f"budget (headroom {options.min_headroom_gib:g} GiB): run the sweep "
                          "longer or lower export.min_headroom_gib")
    best, why = _fastest(records, candidates, options)
    if not options.prefer_simpler:
        return best, why
    simpler, because = simplest_within_noise(best, candidates, records,
                                             noise.run_to_run_noise(records, prior_cv))
    if simpler is best:
        return best, f"{why}; {because}" if because else why
    return simpler, (f"{because}; pass export.trial={best.number} to export the fastest "
                     "anyway")


def _fastest(records: list[TrialRecord], candidates: list[TrialRecord],
             options: ExportSettings) -> tuple[TrialRecord, str]:
    confirmed = [r for r in candidates if (r.attrs.get("confirm") or {}).get("median")]
    if options.use_confirmed and confirmed:
        best = max(confirmed, key=lambda r: r.attrs["confirm"]["median"])
        return best, (f"best confirmed median {best.attrs['confirm']['median']:,.0f} tok/s over "
                      f"{len(best.attrs['confirm']['tokens_per_s'])} re-runs")
    best = selection.best(records, None, min_headroom_gib=options.min_headroom_gib)
    if options.min_headroom_gib > 0:
        return best, (f"fastest trial with >= {options.min_headroom_gib:g} GiB memory headroom "
                      f"({best.tokens_per_s:,.0f} tok/s)")
    return best, f"best feasible trial ({best.tokens_per_s:,.0f} tok/s)"


def changes_from(record: TrialRecord, baseline: TrialRecord | None) -> int:
    if baseline is None:
        return 0
    return sum(1 for k, v in record.params.items() if baseline.params.get(k) != v)


def versus_baseline(best: TrialRecord, base: TrialRecord,
                    level: noise.Noise) -> tuple[bool, str]:
    """(is the best really faster than the baseline, the numbers that say so): confirm's
    paired test where it compared the two, else the sweep's interval."""
    test = (best.attrs.get("confirm") or {}).get("vs_baseline")
    if test and (best.attrs.get("confirm") or {}).get("baseline") == base.number:
        return test["real"] and test["ratio"] > 0, test["text"]
    gain = noise.gain(best, base, level)
    if gain is None:
        return True, ""
    return gain.better, gain.text()


def simplest_within_noise(best: TrialRecord, candidates: list[TrialRecord],
                          records: list[TrialRecord],
                          level: noise.Noise) -> tuple[TrialRecord, str]:
    """The candidate with the fewest knob changes from the baseline that ``best`` is not
    separably faster than (``best`` itself when none is simpler), and why."""
    base = selection.baseline(records)
    if base is None:
        return best, ""
    if base is best:
        return best, "it is the baseline"
    numbers = ""
    if base in candidates:  # a completed baseline within the budget
        real, numbers = versus_baseline(best, base, level)
        if not real:
            return base, (f"the fastest, trial {best.number}, against the baseline: "
                          f"{numbers}; so the baseline (trial {base.number}) is exported")
    within = []
    for r in candidates:
        if r is best or changes_from(r, base) >= changes_from(best, base):
            continue
        gain = noise.gain(best, r, level)
        if gain is not None and not gain.better:
            within.append((changes_from(r, base), -(r.tokens_per_s or 0), r.number, r, gain))
    if not within:
        return best, f"against the baseline: {numbers}" if numbers else ""
    _, _, _, simpler, gain = min(within, key=lambda t: t[:3])
    return simpler, (f"trial {simpler.number} changes {changes_from(simpler, base)} knob(s) "
                     f"instead of {changes_from(best, base)}, and the fastest (trial "
                     f"{best.number}) against it: {gain.text()}")
