"""The cost model on runs it was not fitted on: a measured landscape held out by model size,
and the published points held out by source.

    .venv/bin/python -m bench.cost_model_heldout                 # ~10 s, no trial runs
    .venv/bin/python -m bench.cost_model_heldout --old 92c4b88   # and the old model (~17 s)
    .venv/bin/python -m bench.cost_model_heldout --runs my_runs.csv  # your runs, held out

Data (bench/data/README.md says what each column means and which settings are assumed):

[vT]  Bang et al., "vTrain", MICRO'24 (arXiv:2312.12391); VIA-Research/vTrain
      data/ground_truth_single.csv at f8dda84 (MIT), committed as
      bench/data/vtrain_single.csv: 1,440 Megatron-DeepSpeed iteration times of 8 GPT
      sizes on 2, 4 and 8 A100s of one node. Mapped as fp16, full recompute, no sequence
      parallel, no optimizer sharding, GPT-2 vocabulary padded as Megatron pads it, on the
      gpu_a100 profile (312 TFLOP/s fp16 dense: NVIDIA A100 datasheet).
[pub] bench/cost_model_accel.py's published points (N21 Table 1, K22 Table 5, MindFormers),
      imported from there, the cited runs of bench/data/published_runs.csv
      (bench/published_runs.py), and ZeRO's model-state memory [Z20].

First, the protocol users follow (issue 33), **calibrate small, plan big**: the constants
fitted on vTrain's single-node runs alone predict every multi-node published run (by
source, signed, false OOM, ranking within groups of one source, model and node count),
beside the profiles' priors with no fit; and inside vTrain, a fit on hidden size 1,024
predicts hidden size 2,048.

Every headline is held out: the constants are fitted (autotune.plan.calibration.fit) on the
other model sizes, groups or sources, then used on the one left out. Uncalibrated numbers
use the profile's priors; in-sample numbers are labelled as such. A false OOM is a
configuration that ran but that the model predicts over the device memory (strictly, and
as the sweep's guard rules: the optimistic end of the memory interval over the memory).

Both models go through bench/cost_model_adapter.py with the same points and folds: this
checkout's in-process, ``--old REV``'s in a subprocess of that revision's worktree
(bench/old_model.py), with its own code and priors. A setting a model's ``Job`` cannot
represent (a sharding level above 1, virtual stages, context parallel, flash attention) is
dropped for that model and listed per point.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from autotune.plan.calibration import Measurement
from autotune.plan.layout import Cluster, Job, Recompute
from autotune.plan.model_dims import ModelDims, total_params
from autotune.plan.predict import HELD_OUT_MEMORY_ERROR
from bench import cost_model_accel as accel
from bench import cost_model_adapter as adapter
from bench import old_model, published_runs
from bench._common import REPO, cli, write_result
from bench.heldout_tables import print_new, print_side_by_side, print_unrepresented
from trials.contract.schema import Arch, DType, HardwareConfig

VTRAIN_CSV = REPO / "bench" / "data" / "vtrain_single.csv"
#: GPT-2 BPE (vTrain src/config.py default vocab_size; the validation configs keep it).
VTRAIN_VOCAB = 50257
#: Megatron pads the vocabulary to a multiple of 128 x t (--make-vocab-size-divisible-by).
VOCAB_DIVISOR = 128
#: The A100 sizes the rows may have run on (the repository does not say which).
A100_MEMORY_GIB = (40.0, 80.0)
#: A group's ranking counts when it has this many configurations.
MIN_GROUP_ROWS = 3
#: "The model's fastest is within 5 % of the measured fastest" (issue 21).
FASTEST_TOLERANCE = 0.05
#: vTrain's two hidden sizes: the extrapolation split fits on the first, tests the second.
SMALL_HIDDEN, BIG_HIDDEN = 1024, 2048


@dataclass(frozen=True)
class LandscapeRow:
    """One measured vTrain configuration, as the cost model sees it."""

    dims: ModelDims
    job: Job
    step_s: float

    @property
    def model(self) -> str:
        return f"h{self.dims.hidden} L{self.dims.layers}"

    @property
    def group(self) -> tuple[str, int, int]:
        """(model, GPUs, global batch): the configurations one user would choose among."""
        return self.model, self.job.devices, self.job.global_batch


def padded_vocab(vocab: int, mp: int) -> int:
    """Megatron's _vocab_size_with_padding: the next multiple of 128 x t."""
    multiple = VOCAB_DIVISOR * mp
    return math.ceil(vocab / multiple) * multiple


def vtrain_rows(path: Path = VTRAIN_CSV) -> list[LandscapeRow]:
    """The CSV's rows mapped to the cost model's inputs (bench/data/README.md)."""
    rows = []
    with path.open(encoding="utf-8-sig", newline="") as f:  # upstream starts with a BOM
        for r in csv.DictReader(f):
            t, d, p = (int(r[k]) for k in ("tensor parallelism", "data parallelism",
                                           "pipeline parallelism"))
            h, batch, b = int(r["hidden size"]), int(r["global batch"]), int(r["micro batch"])
            dims = ModelDims(arch=Arch.gpt, layers=int(r["# layers"]), hidden=h,
                             heads=int(r["attention heads"]),
                             kv_heads=int(r["attention heads"]), ffn=4 * h,
                             seq=int(r["sequence length"]), vocab=padded_vocab(VTRAIN_VOCAB, t))
            job = Job(dp=d, mp=t, pp=p, global_batch=batch, micro_batches=batch // (d * b),
                      dtype=DType.float16, recompute=Recompute.full)
            if job.devices != int(r["# GPUs"]) or job.micro_batch_size != b:
                raise ValueError(f"{path}: row {r} does not map to a job ({job})")
            rows.append(LandscapeRow(dims, job, float(r["iteration time (ms)"]) / 1e3))
    return rows


def peak_flops(hw: HardwareConfig, dtype: DType) -> float:
    return float(hw.peak_tflops[dtype.value]) * 1e12


def vtrain_measurement(row: LandscapeRow, hw: HardwareConfig) -> Measurement:
    return Measurement(dims=row.dims, job=row.job, cluster=Cluster(hw, 1),
                       peak_flops_per_device=peak_flops(hw, row.job.dtype), step_s=row.step_s)


# -- scores ------------------------------------------------------------------------------

def ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        tied = values == v
        r[tied] = r[tied].mean()
    return r


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of the ranks (nan when either side is constant)."""
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def ranking(rows: list[LandscapeRow], predicted: list[float]) -> dict:
    """Per group with >= 3 configurations: is the model's fastest within 5 % of the measured
    fastest, and Spearman's rho of predicted against measured."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        groups[row.group].append(i)
    hits, rhos = [], []
    for members in groups.values():
        if len(members) < MIN_GROUP_ROWS:
            continue
        measured = np.array([rows[i].step_s for i in members])
        guess = np.array([predicted[i] for i in members])
        hits.append(bool(measured[np.argmin(guess)] <= measured.min() * (1 + FASTEST_TOLERANCE)))
        rhos.append(spearman(guess, measured))
    return {"groups": len(hits), "fastest_within_5pct": int(sum(hits)),
            "spearman_median": float(np.nanmedian(rhos)) if rhos else float("nan"),
            "spearman_mean": float(np.nanmean(rhos)) if rhos else float("nan")}


def errors(predicted: list[float], measured: list[float]) -> dict:
    rel = np.array(predicted) / np.array(measured) - 1
    return {"n": len(rel), "mape": float(np.mean(np.abs(rel))), "signed_mean": float(rel.mean()),
            "max_abs": float(np.max(np.abs(rel)))}


def false_ooms(peaks_gib: list[float], budget_gib: float) -> dict:
    """Ran, but predicted over the budget: strictly (the predicted peak), and as the sweep's
    guard rules (the optimistic end of the memory interval over the budget)."""
    peaks = np.array(peaks_gib)
    optimistic = peaks * (1 - HELD_OUT_MEMORY_ERROR)
    return {"budget_gib": budget_gib, "over_budget": int(np.sum(peaks > budget_gib)),
            "ruled_out_by_guard": int(np.sum(optimistic > budget_gib))}


def landscape_scores(rows: list[LandscapeRow], steps: list[float], peaks: list[float]) -> dict:
    return {**errors(steps, [r.step_s for r in rows]), **ranking(rows, steps),
            "false_oom": [false_ooms(peaks, b) for b in A100_MEMORY_GIB],
            "peak_gib_max": max(peaks)}


# -- the request: every point and every fold, the same for both models -------------------

A100 = "gpu_a100"


def point_of(dims: ModelDims, settings: dict, hardware: str, nodes: int,
             step_s: float | None, peak_gib: float | None = None,
             hardware_overrides: list[str] | None = None) -> dict:
    """One point as bench/cost_model_adapter.py reads it (``hardware_overrides``: where the
    run's cluster differs from its profile)."""
    return {"dims": {**asdict(dims), "arch": dims.arch.value}, "job": settings,
            "hardware": hardware, "hardware_overrides": hardware_overrides or [],
            "nodes": nodes, "step_s": step_s, "peak_gib": peak_gib}


def published_points(runs_csv: Path = published_runs.CSV_PATH) -> list[dict]:
    """bench/cost_model_accel.py's points and ``runs_csv``'s (bench/data/published_runs.csv
    by default), one shape: source, name, dims, settings (a run's Job fields and the ones a
    Job may lack), hardware (a profile name), nodes, step_s, published."""
    pts = [{"source": p["source"], "name": p["name"], "dims": p["dims"],
            "settings": adapter.settings_of(p["job"]), "hardware": p["hw"].name,
            "nodes": p["nodes"], "step_s": p["step_s"], "published": p["published"]}
           for p in accel.points()]
    return pts + published_runs.points(runs_csv)


class Folds:
    """The request's points and tasks; each section is the list of its task ids."""

    def __init__(self) -> None:
        self.points: list[dict] = []
        self.tasks: list[dict] = []

    def add(self, points: list[dict]) -> list[int]:
        start = len(self.points)
        self.points += points
        return list(range(start, len(self.points)))

    def task(self, prior: str, fit_on: list[int] | None, predict: list[int],
             fit_peaks: bool = False) -> int:
        self.tasks.append({"prior": prior, "fit_on": fit_on, "predict": predict,
                           "fit_peaks": fit_peaks})
        return len(self.tasks) - 1

    def held_out(self, prior: str, indices: list[int], key) -> list[int]:
        """One task per value of ``key``: fit on the indices of every other value."""
        return [self.task(prior, [i for i in indices if key(i) != value],
                          [i for i in indices if key(i) == value])
                for value in sorted({key(i) for i in indices})]

    @property
    def request(self) -> dict:
        return {"points": self.points, "tasks": self.tasks}


def build(rows: list[LandscapeRow], pubs: list[dict],
          checks: list[dict]) -> tuple[Folds, dict]:
    """Every point and fold: the landscape by model size, by group, uncalibrated and
    in-sample; the published points by source (a source's points on each of its profiles
    fitted apart, on the prior of that profile); the memory-only checks with the fit their
    source's points are held out by."""
    folds = Folds()
    vt = folds.add([point_of(r.dims, adapter.settings_of(r.job), A100, 1, r.step_s)
                    for r in rows])
    pub = folds.add([point_of(p["dims"], p["settings"], p["hardware"], p["nodes"],
                              p["step_s"], p.get("peak_gib"), p.get("hardware_overrides"))
                     for p in pubs])
    source = {i: p["source"] for i, p in zip(pub, pubs)}
    sections: dict = {"vtrain": {
        "uncalibrated": [folds.task(A100, None, vt)],
        "leave_one_model_out": folds.held_out(A100, vt, lambda i: rows[i].model),
        "leave_one_group_out": folds.held_out(A100, vt, lambda i: rows[i].group),
        "in_sample": [folds.task(A100, vt, vt)]}, "published": {}}
    for name in sorted(set(source.values())):
        test = [i for i in pub if source[i] == name]
        train = [i for i in pub if source[i] != name]
        parts = {}
        for hw in sorted({folds.points[i]["hardware"] for i in test}):
            part = [i for i in test if folds.points[i]["hardware"] == hw]
            parts.setdefault("uncalibrated", []).append(folds.task(hw, None, part))
            parts.setdefault("held_out", []).append(folds.task(hw, train, part))
        sections["published"][name] = parts
    # Calibrate small, plan big (issue 33): the constants fitted on vTrain's single-node
    # runs alone predict every multi-node published run (each on its own profile's priors
    # before the fit); beside them, the priors with no fit at all.
    multi = [i for i, p in zip(pub, pubs) if p["nodes"] > 1]
    sections["protocol"] = {"calibrated": [], "priors": []}
    for hw in sorted({folds.points[i]["hardware"] for i in multi}):
        part = [i for i in multi if folds.points[i]["hardware"] == hw]
        sections["protocol"]["calibrated"].append(folds.task(hw, vt, part))
        sections["protocol"]["priors"].append(folds.task(hw, None, part))
    # Extrapolation inside vTrain: fit on hidden size 1,024, predict hidden size 2,048.
    small = [i for i in vt if rows[i].dims.hidden == SMALL_HIDDEN]
    big = [i for i in vt if rows[i].dims.hidden == BIG_HIDDEN]
    sections["extrapolation"] = {"fit_small_test_big": [folds.task(A100, small, big)],
                                 "in_sample_big": [folds.task(A100, big, big)]}
    chk = folds.add([point_of(p["dims"], p["settings"], p["hardware"], p["nodes"],
                              p["step_s"], p["peak_gib"], p.get("hardware_overrides"))
                     for p in checks])
    sections["memory_checks"] = [
        folds.task(p["hardware"], [i for i in pub if source[i] != p["source"]], [i])
        for i, p in zip(chk, checks)]
    # Every published peak, held out by source: the memory constants fitted to the other
    # sources' peaks (one task a point: each on the prior of its own profile).
    peaked = [(i, p) for i, p in zip(pub + chk, pubs + checks) if p.get("peak_gib")]
    sections["memory_held_out"] = [
        folds.task(p["hardware"], [j for j, q in peaked if q["source"] != p["source"]], [i],
                   fit_peaks=True) for i, p in peaked]
    return folds, sections


def gathered(folds: Folds, answer: dict, task_ids: list[int]) -> tuple[list[int], list, list]:
    """(point indices, predicted steps, predicted peaks) of a section's tasks."""
    idx, steps, peaks = [], [], []
    for t in task_ids:
        idx += folds.tasks[t]["predict"]
        steps += answer["tasks"][t]["step_s"]
        peaks += answer["tasks"][t]["peak_gib"]
    return idx, steps, peaks


# -- scores of one model's answer -------------------------------------------------------

def by_model(rows: list[LandscapeRow], steps: list[float], peaks: list[float]) -> dict:
    out = {}
    for model in sorted({r.model for r in rows}, key=lambda m: (len(m), m)):
        idx = [i for i, r in enumerate(rows) if r.model == model]
        out[model] = {"params_b": total_params(rows[idx[0]].dims) / 1e9,
                      **landscape_scores([rows[i] for i in idx], [steps[i] for i in idx],
                                         [peaks[i] for i in idx])}
    out["all"] = {"params_b": None, **landscape_scores(rows, steps, peaks)}
    return out


def landscape(rows: list[LandscapeRow], folds: Folds, sections: dict, answer: dict) -> dict:
    result: dict = {"rows": len(rows), "groups": len({r.group for r in rows})}
    for name, task_ids in sections.items():
        idx, steps, peaks = gathered(folds, answer, task_ids)
        order = np.argsort(idx)
        result[name] = by_model(rows, [steps[k] for k in order], [peaks[k] for k in order])
    constants = answer["tasks"][sections["in_sample"][0]]["constants"]
    result["in_sample_constants"] = {
        "compute_efficiency_fp16": constants["compute_efficiency"]["float16"],
        **{k: v for k, v in constants.items() if k.endswith(("efficiency", "_s"))
           and isinstance(v, float)}}
    return result


def published(pubs: list[dict], offset: int, folds: Folds, sections: dict,
              answer: dict) -> dict:
    """Each source held out (its points start at ``offset`` of the request's)."""
    out = {}
    for source, parts in sections.items():
        scores: dict = {}
        for label, task_ids in parts.items():
            idx, steps, peaks = gathered(folds, answer, task_ids)
            test = [pubs[i - offset] for i in idx]
            # The device's own memory where the source states it (it may differ from the
            # profile's: torchtitan's H100s have 96 GB).
            budgets = [p.get("device_memory_gib")
                       or float(adapter.profile(p["hardware"]).device_memory_gib) for p in test]
            scores[label] = {**errors(steps, [p["step_s"] for p in test]),
                             "false_oom": false_oom_points(peaks, budgets),
                             **peak_scores([{"source": source, "name": p["name"],
                                             "predicted_gib": m, "published_gib": p["peak_gib"]}
                                            for p, m in zip(test, peaks) if p.get("peak_gib")]),
                             "points": [{"name": p["name"], "step_s": p["step_s"],
                                         "predicted_s": s, "peak_gib": m}
                                        for p, s, m in zip(test, steps, peaks)]}
        scores["fit_source"] = [answer["tasks"][t]["source"] for t in parts["held_out"]]
        out[source] = scores
    every = [s["held_out"] for s in out.values()]
    n = sum(s["n"] for s in every)
    out["all"] = {"n": n, "held_out_mape": sum(s["mape"] * s["n"] for s in every) / n,
                  "uncalibrated_mape": sum(s["uncalibrated"]["mape"] * s["uncalibrated"]["n"]
                                           for s in out.values()) / n,
                  "false_oom": sum(s["false_oom"]["over_budget"] for s in every),
                  **peak_scores([q for s in every for q in s["peak_points"]])}
    return out


def protocol(pubs: list[dict], offset: int, folds: Folds, parts: dict,
             answer: dict) -> dict:
    """Calibrate small, plan big: every multi-node published run predicted by the fit on
    vTrain's single-node runs (``calibrated``) and by the priors (``priors``): step errors
    overall and by source, false OOM, published peaks, and the ranking within groups."""
    out = {}
    for label, task_ids in parts.items():
        idx, steps, peaks = gathered(folds, answer, task_ids)
        test = [pubs[i - offset] for i in idx]
        budgets = [p.get("device_memory_gib")
                   or float(adapter.profile(p["hardware"]).device_memory_gib) for p in test]
        by_source = {}
        for source in sorted({p["source"] for p in test}):
            k = [j for j, p in enumerate(test) if p["source"] == source]
            by_source[source] = errors([steps[j] for j in k], [test[j]["step_s"] for j in k])
        out[label] = {**errors(steps, [p["step_s"] for p in test]), "step_by_source": by_source,
                      "false_oom": false_oom_points(peaks, budgets),
                      **peak_scores([{"source": p["source"], "name": p["name"],
                                      "predicted_gib": m, "published_gib": p["peak_gib"]}
                                     for p, m in zip(test, peaks) if p.get("peak_gib")]),
                      "ranking": published_ranking(test, steps),
                      "points": [{"source": p["source"], "name": p["name"],
                                  "step_s": p["step_s"], "predicted_s": s_,
                                  "predicted_gib": m, "device_gib": b}
                                 for p, s_, m, b in zip(test, steps, peaks, budgets)]}
    return out


def published_ranking(points: list[dict], predicted: list[float]) -> dict:
    """Per group of published runs of one source, model and node count (2 runs or more):
    is the model's fastest per sample within 5 % of the measured fastest per sample."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        groups[(p["source"], repr(p["dims"]), p["nodes"])].append(i)
    hits = []
    for members in groups.values():
        if len(members) < 2:
            continue
        per_sample = np.array([points[i]["step_s"] / points[i]["settings"]["global_batch"]
                               for i in members])
        guess = np.array([predicted[i] / points[i]["settings"]["global_batch"]
                          for i in members])
        hits.append(bool(per_sample[np.argmin(guess)]
                         <= per_sample.min() * (1 + FASTEST_TOLERANCE)))
    return {"groups": len(hits), "fastest_within_5pct": int(sum(hits))}


def extrapolation(rows: list[LandscapeRow], folds: Folds, parts: dict, answer: dict) -> dict:
    """vTrain's hidden size 2,048 predicted by the fit on hidden size 1,024, and the same
    rows in-sample (labelled)."""
    out = {}
    for label, task_ids in parts.items():
        idx, steps, peaks = gathered(folds, answer, task_ids)
        out[label] = landscape_scores([rows[i] for i in idx], steps, peaks)
    return out


def peak_scores(points: list[dict]) -> dict:
    """Predicted against published peaks (``predicted_gib``, ``published_gib`` a point):
    their errors (None without a point), per source, and the points themselves."""
    def scored(of: list[dict]) -> dict | None:
        return errors([q["predicted_gib"] for q in of],
                      [q["published_gib"] for q in of]) if of else None

    sources = sorted({q["source"] for q in points})
    return {"peak_memory": scored(points), "peak_points": points,
            "by_source": {s: scored([q for q in points if q["source"] == s])
                          for s in sources}}


def false_oom_points(peaks: list[float], budgets: list[float]) -> dict:
    """false_ooms over points whose devices differ in memory."""
    parts = [false_ooms([p], b) for p, b in zip(peaks, budgets)]
    return {"budget_gib": sorted(set(budgets)),
            "over_budget": sum(f["over_budget"] for f in parts),
            "ruled_out_by_guard": sum(f["ruled_out_by_guard"] for f in parts)}


def memory_checks(checks: list[dict], task_ids: list[int], answer: dict) -> dict:
    """The memory-only points: each published peak beside the predicted one, with the step
    time held out beside it (never a headline); a published OOM, whether the guard rules
    the point out (its interval's optimistic end over the device's memory)."""
    peaks, ooms = [], []
    for p, t in zip(checks, task_ids):
        task = answer["tasks"][t]
        predicted, step = task["peak_gib"][0], task["step_s"][0]
        row = {"source": p["source"], "name": p["name"], "predicted_gib": predicted,
               "published_gib": p["peak_gib"],
               "step_error": step / p["step_s"] - 1 if p["step_s"] else None}
        if p["out_of_memory"]:
            budget = p["device_memory_gib"]
            ooms.append({**row, "budget_gib": budget,
                         "ruled_out_by_guard": bool(false_ooms([predicted], budget)
                                                    ["ruled_out_by_guard"])})
        else:
            peaks.append(row)
    return {**peak_scores(peaks), "out_of_memory": ooms}


def memory_held_out(peaked: list[dict], task_ids: list[int], answer: dict) -> dict:
    """Every published peak predicted by the memory constants fitted to the other
    sources' peaks (build's ``memory_held_out`` tasks, one a point, in the same order)."""
    peaks = [{"source": p["source"], "name": p["name"],
              "predicted_gib": answer["tasks"][t]["peak_gib"][0],
              "published_gib": p["peak_gib"],
              "fit": {k: answer["tasks"][t]["constants"][k]
                      for k in ("runtime_overhead_gib", "allocator_factor")}}
             for p, t in zip(peaked, task_ids)]
    return peak_scores(peaks)


def scores(rows: list[LandscapeRow], pubs: list[dict], checks: list[dict], folds: Folds,
           sections: dict, answer: dict) -> dict:
    peaked = [p for p in pubs + checks if p.get("peak_gib")]
    return {"protocol": protocol(pubs, len(rows), folds, sections["protocol"], answer),
            "extrapolation": extrapolation(rows, folds, sections["extrapolation"], answer),
            "vtrain": landscape(rows, folds, sections["vtrain"], answer),
            "published": published(pubs, len(rows), folds, sections["published"], answer),
            "memory_checks": memory_checks(checks, sections["memory_checks"], answer),
            "memory_held_out": memory_held_out(peaked, sections["memory_held_out"], answer)}


def zero_memory() -> list[dict]:
    zero = accel.zero_memory_points()
    print("[Z20] model-state memory (no fitted constant enters it; this checkout's model): "
          + "; ".join(f"{z['name']} {z['predicted_gb']:.1f} vs {z['published_gb']} GB "
                      f"({100 * z['error']:+.1f} %)" for z in zero))
    return zero


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", metavar="REV",
                        help="also run this revision's cost model on the same points and "
                             "folds, side by side (92c4b88: the model before issue 21)")
    parser.add_argument("--runs", metavar="CSV", type=Path, default=published_runs.CSV_PATH,
                        help="the runs to hold out by source, in published_runs.csv's "
                             "columns (bench/data/README.md): runs kept apart from this "
                             "project are scored as the committed ones are (default: "
                             "bench/data/published_runs.csv)")
    args = parser.parse_args()
    try:
        every = published_points(args.runs)
        for p in every:  # each row's profile and overrides compose (ConfigError otherwise)
            adapter.profile(p["hardware"], tuple(p.get("hardware_overrides") or ()))
    except (OSError, KeyError, ValueError) as exc:  # one line naming the fix, exit 2
        parser.exit(2, f"cost_model_heldout: --runs {args.runs}: cannot read it as "
                       f"published_runs.csv's columns ({type(exc).__name__}: {exc}); see "
                       "bench/data/README.md\n")
    rows = vtrain_rows()
    pubs = [p for p in every if not p.get("memory_only")]
    checks = [p for p in every if p.get("memory_only")]
    folds, sections = build(rows, pubs, checks)
    answers = {"new": adapter.run(folds.request)}
    if args.old:
        answers["old"] = old_model.predictions(args.old, folds.request)
    result = scores(rows, pubs, checks, folds, sections, answers["new"])
    print_new(result)
    result["Z20_model_states"] = zero_memory()
    result["unrepresented"] = print_unrepresented(pubs, len(rows), answers)
    directory = None
    if args.old:
        old = answers["old"]
        result["old"] = {"revision": args.old, "commit": old["commit"],
                         "copied_profiles": old["copied_profiles"],
                         **scores(rows, pubs, checks, folds, sections, old)}
        print_side_by_side(result, result["old"], old["commit"])
        if old["copied_profiles"]:
            print(f"profiles the old revision lacks, copied from this checkout: "
                  f"{', '.join(old['copied_profiles'])}")
        # The committed record is of the committed runs; a run on others stays in runs/.
        if args.runs == published_runs.CSV_PATH:
            directory = REPO / "bench" / "results"
    name = "cost_model_heldout" + (f"_vs_{answers['old']['commit'][:7]}" if args.old else "")
    print(f"wrote {write_result(name, result, directory=directory)}")


if __name__ == "__main__":
    cli(main)
