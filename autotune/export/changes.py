"""What the exported job changes against the baseline, what each change measured, and
what to watch out for when it goes to production."""

from __future__ import annotations

from autotune.study.records import TrialRecord
from trials.contract.schema import DType, TrialConfig
from trials.contract.vocabulary import Recompute


def _pct(new: float | None, old: float | None) -> str:
    if not new or not old:
        return "-"
    return f"{100 * (new / old - 1):+.1f} %"


def _alone(knob: str, value, baseline: TrialRecord, records: list[TrialRecord]) -> str:
    """The one-knob-at-a-time trial for this change, if the study has one."""
    for r in records:
        if r.reused_from is not None or r.params.get(knob) != value:
            continue
        others = {k: v for k, v in r.params.items() if k != knob}
        if others == {k: v for k, v in baseline.params.items() if k != knob}:
            if r.ok:
                return f"{_pct(r.standing, baseline.standing)} (trial {r.number})"
            return f"{r.reason_text} (trial {r.number})"
    return "not measured alone"


def _config_of(record: TrialRecord | None) -> TrialConfig | None:
    return record.config() if record is not None else None


def caveats(job: TrialConfig, base: TrialConfig | None) -> list[str]:
    notes = []
    if base is not None and base.train.global_batch != job.train.global_batch:
        notes.append(f"Global batch changed {base.train.global_batch} -> "
                     f"{job.train.global_batch}: rescale the learning rate (linear rule: "
                     f"lr x {job.train.global_batch / base.train.global_batch:g}) and re-check "
                     "convergence.")
    elif base is not None and base.train.micro_batches != job.train.micro_batches:
        notes.append(f"Micro-batches changed {base.train.micro_batches} -> "
                     f"{job.train.micro_batches} with the global batch fixed at "
                     f"{job.train.global_batch}: the learning rate needs no change.")
    if base is not None and base.parallel.split != job.parallel.split:
        notes.append(f"Parallel split changed {base.parallel.split} -> {job.parallel.split}: "
                     "checkpoints from the old split must be re-sharded "
                     "(MindFormers `auto_trans_ckpt: True`, or "
                     "`mindspore.parallel.transform_checkpoints`).")
    if job.precision.dtype is DType.float16:
        notes.append(f"fp16: dynamic loss scaling is on (initial scale "
                     f"{job.precision.init_scale:g}); watch the overflow count in the metrics.")
    if job.train.recompute is Recompute.full:
        notes.append("Recompute is on: hardware FLOPs exceed model FLOPs (HFU > MFU).")
    notes.append(f"Measured on hardware profile `{job.hardware.name}` "
                 f"({job.hardware.backend.value}); re-tune before moving to other hardware.")
    return notes


def describe_changes(chosen: TrialRecord, baseline: TrialRecord | None, job: TrialConfig,
                     records: list[TrialRecord]) -> str:
    lines = ["# Changes against the baseline\n"]
    if baseline is None:
        lines.append("The study has no baseline trial; nothing to compare against.\n")
        base_cfg = None
    else:
        base_cfg = _config_of(baseline)
        lines.append(f"Baseline: trial {baseline.number}; exported: trial {chosen.number}.\n")
        changed = [k for k in chosen.params if chosen.params[k] != baseline.params.get(k)]
        if changed:
            lines += ["| knob | baseline | exported | measured alone |",
                      "|---|---|---|---|"]
            lines += [f"| `{k}` | {baseline.params.get(k)} | {chosen.params[k]} | "
                      f"{_alone(k, chosen.params[k], baseline, records)} |" for k in changed]
        else:
            lines.append("The baseline itself is the best configuration found.")
        lines.append("")
        # The figures the pick was made on: confirm's medians where it re-measured both.
        pair = [r.confirmed_tokens_per_s for r in (baseline, chosen)]
        where = "medians of confirm's re-runs"
        if not all(pair):
            pair, where = [r.standing for r in (baseline, chosen)], "in the sweep"
        lines.append(f"Overall: {_num(pair[0])} -> {_num(pair[1])} {chosen.rate} "
                     f"({_pct(pair[1], pair[0])}) {where}; peak memory "
                     f"{_gib(baseline.peak_memory_gib)} -> {_gib(chosen.peak_memory_gib)}.\n")
    lines.append("## Caveats\n")
    lines += [f"- {note}" for note in caveats(job, base_cfg)]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def _gib(value: float | None) -> str:
    return f"{value:.2f} GiB" if value is not None else "-"
