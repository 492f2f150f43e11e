"""Is a trial input-bound? Its data wait, or its pipeline probe, says so.

One rule, read by the report's diagnosis (it opens with a data-bound baseline), by
``profile``'s rules (autotune/profiling/rules.py: the same verdict on the same numbers) and by
the search (a data-bound baseline has its data knobs tried first: the sweep's
neighbours, ``tune``'s data stage)::

    evidence = data_bound_evidence(record)   # ("spent 55.0 % of ...", {...}) or None
"""

from __future__ import annotations

from autotune.presentation.labels import share_text as _pct
from autotune.study.records import TrialRecord
from trials.contract.performance import Performance

#: A data-wait share above this (fraction of step time) means the input pipeline is short.
DATA_WAIT_HIGH = 0.10
#: Training at under this fraction of the step's compute-alone rate (the pipeline probe)
#: means something else takes the cores: on a data-bound CPU job, the input pipeline's
#: workers (the step 2-3x slower than alone, with little data wait: issue 23).
COMPUTE_SHARE_LOW = 0.67
#: The data knobs (override paths; ``data`` is the source's config group): what a fix of
#: a data-bound trial changes.
DATA_KNOBS = ("data.num_workers", "data.multiprocessing", "data.prefetch", "data")

#: What to do when no data knob helps, whatever the workload's kind (text or images):
#: less Python per sample, not more workers to run it.
CHEAPER_PREPROCESSING = ("cheaper preprocessing: less Python per sample (MindSpore's C++ "
                         "dataset transforms for its kind, or work done once ahead, e.g. "
                         "samples tokenized or decoded into MindRecord)")


def pipeline_cost(perf: Performance) -> float | None:
    """The share of the step the input pipeline costs, by the pipeline probe: 1 - trained /
    step-alone samples/s (0 when training kept pace); None without a probe."""
    train, alone = perf.samples_per_s, perf.compute_samples_per_s
    return max(0.0, 1.0 - train / alone) if train and alone else None


def data_bound_evidence(record: TrialRecord) -> tuple[str, dict[str, float]] | None:
    """Why a trial is input-bound, in words and numbers, or None (:func:`input_bound` of
    its scorecard)."""
    return input_bound(record.perf, record.data_wait_share, loaded=record.contended)


def input_bound(perf: Performance, wait: float | None, *, loaded: bool = False,
                wait_s: float | None = None) -> tuple[str, dict[str, float]] | None:
    """Why a run is input-bound, in words and numbers, or None: its data wait (``wait``, a
    share of the step), or its pipeline probe (the pipeline alone slower than the step
    alone, or the step in training far slower than alone while the pipeline shares the
    cores). The one rule the report, the search and ``profile`` judge a run by.

    ``loaded``: the run was measured while other processes used the cores. Training far
    slower than the step alone then is no evidence against the pipeline: the load took
    cores too, and the probe and the training ran at different moments of it: the rule
    cannot tell the load from the pipeline's workers. ``wait_s``: the wait in seconds a
    step, said beside its share (a profile measures it)."""
    pipe, compute, train = (perf.pipeline_samples_per_s, perf.compute_samples_per_s,
                            perf.samples_per_s)
    nums: dict[str, float] = {}
    facts = []
    if wait is not None and wait > DATA_WAIT_HIGH:
        nums["data_wait_share"] = wait
        ms = "" if wait_s is None else f", {1e3 * wait_s:.1f} ms a step"
        facts.append(f"spent {_pct(wait)} of its step time waiting for input data{ms} (above "
                     f"{_pct(DATA_WAIT_HIGH)})")
    if pipe and compute and train:
        probe = {"pipeline_samples_per_s": pipe, "compute_samples_per_s": compute,
                 "samples_per_s": train}
        cost = pipeline_cost(perf)
        if pipe < compute:
            nums |= probe | {"pipeline_cost_share": cost}
            facts.append(f"has an input pipeline that alone delivers {pipe:,.0f} samples/s while "
                         f"the step alone consumes {compute:,.0f}; it trained at {train:,.0f} "
                         f"samples/s, {train / compute:.2f} x its step alone: the pipeline "
                         f"costs {_pct(cost)} of the step")
        elif train < COMPUTE_SHARE_LOW * compute and not loaded:
            nums |= probe | {"pipeline_cost_share": cost}
            facts.append(f"trained at {train:,.0f} samples/s, {train / compute:.2f} x the "
                         f"{compute:,.0f} samples/s of its step alone: the input pipeline "
                         f"({pipe:,.0f} samples/s alone) competes with the step for the cores "
                         f"and costs {_pct(cost)} of the step")
    return ("; ".join(facts), nums) if facts else None

