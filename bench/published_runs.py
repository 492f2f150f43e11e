"""Published training runs of bench/data/published_runs.csv as cost-model points.

Each row is one configuration a paper or a framework's own benchmark page published, with
its citation and the settings the source states (bench/data/README.md says which values
are assumed). The published throughput becomes the step time the model is scored on:

- ``tokens_per_s_per_gpu``: step = global batch x s / (throughput x GPUs);
- ``tflops_per_gpu_eq3``: Megatron-LM's count with recomputation ([N21] eq. 3, which
  Megatron-DeepSpeed logs): step = eq. 3 FLOPs of the iteration / (throughput x GPUs);
- ``tflops_per_gpu_model``: model FLOPs (6N + attention, what MFU counts,
  ``model_dims.model_flops_per_token``): step = tokens x FLOPs a token / (throughput x GPUs).

The settings a revision's ``Job`` may lack (shard_level, virtual_stages, context_parallel,
flash_attention, the gradient and loss buffers, stage_layers) stay in each point's
settings; bench/cost_model_adapter.py's ``job_of`` drops what the model cannot represent
and names it.

A row marked ``memory_only`` ran with something the model does not represent that changes
its speed more than what it keeps (torchtitan's Float8 + torch.compile under full
recompute; Qwen3's head dim, wider than hidden / heads): it is scored on its published
peak memory alone, never on step time, and enters no fit.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from autotune.plan.model_dims import ModelDims, model_flops_per_token
from bench._common import REPO
from bench.cost_model_accel import megatron_flops
from trials.contract.schema import Arch

CSV_PATH = REPO / "bench" / "data" / "published_runs.csv"
#: GPUs (or NPUs) of one node in every source here.
DEVICES_PER_NODE = 8
UNITS = ("tokens_per_s_per_gpu", "tflops_per_gpu_eq3", "tflops_per_gpu_model")
#: Job settings a row states only where its framework's config says (0/1); empty: the
#: Job's default (gradients reduced in fp32, not overlapped with the backward).
OPTIONAL_FLAGS = ("reduce_in_fp32", "overlap_grad_reduce")


def dims_of(r: dict) -> ModelDims:
    return ModelDims(arch=Arch(r["arch"]), **{k: int(r[k]) for k in (
        "layers", "hidden", "heads", "kv_heads", "ffn", "seq", "vocab")})


def settings_of(r: dict) -> dict:
    """The Job fields of a row (and the ones a Job may lack), checked against its GPUs."""
    dp, tp, pp, cp = (int(r[k]) for k in ("dp", "tp", "pp", "cp"))
    batch, b = int(r["global_batch"]), int(r["micro_batch"])
    if dp * tp * pp * cp != int(r["gpus"]) or batch % (dp * b):
        raise ValueError(f"{CSV_PATH.name}: {r['name']}: dp x tp x pp x cp != GPUs, or the "
                         f"global batch is not a multiple of dp x micro-batch")
    return {"dp": dp, "mp": tp, "pp": pp, "global_batch": batch,
            "micro_batches": batch // (dp * b), "dtype": r["dtype"], "recompute": r["recompute"],
            "sequence_parallel": bool(int(r["sequence_parallel"])),
            "shard_level": int(r["shard_level"]), "virtual_stages": int(r["virtual_stages"]),
            "context_parallel": cp, "flash_attention": bool(int(r["flash_attention"])),
            "fp32_main_grads": bool(int(r["fp32_main_grads"])),
            "keeps_16bit_grads": bool(int(r["keeps_16bit_grads"])),
            "unfused_cross_entropy": bool(int(r["unfused_cross_entropy"])),
            "stage_layers": [int(n) for n in r["stage_layers"].split()] or None,
            **{k: bool(int(r[k])) for k in OPTIONAL_FLAGS if r.get(k)}}


def step_s(r: dict, d: ModelDims) -> float:
    """The published throughput as seconds per optimizer step."""
    gpus, batch, value = int(r["gpus"]), int(r["global_batch"]), float(r["throughput"])
    unit = r["throughput_unit"]
    if unit == "tokens_per_s_per_gpu":
        return batch * d.seq / (value * gpus)
    if unit == "tflops_per_gpu_eq3":
        return megatron_flops(batch, d.seq, d.layers, d.hidden, d.vocab) / (value * 1e12 * gpus)
    if unit == "tflops_per_gpu_model":
        return batch * d.seq * model_flops_per_token(d) / (value * 1e12 * gpus)
    raise ValueError(f"{CSV_PATH.name}: {r['name']}: throughput_unit {unit!r} is not one of "
                     f"{', '.join(UNITS)}")


def points(path: Path = CSV_PATH) -> list[dict]:
    """Every row as a published point (bench/cost_model_heldout.py's shape). A
    memory-only row may publish ``OOM`` as its peak (it ran out of memory, so it has no
    throughput either): ``out_of_memory`` is true and ``peak_gib`` and ``step_s`` None."""
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            d = dims_of(r)
            peak, memory_only = r["peak_memory_gib"], bool(int(r["memory_only"]))
            oom = peak == "OOM"
            if oom and not memory_only:
                raise ValueError(f"{CSV_PATH.name}: {r['name']}: an OOM row is memory_only")
            out.append({"source": r["source"], "name": r["name"], "dims": d,
                        "settings": settings_of(r), "hardware": r["hardware"],
                        # Optional: a CSV written before the column has none.
                        "hardware_overrides": (r.get("hardware_overrides") or "").split(),
                        "nodes": math.ceil(int(r["gpus"]) / DEVICES_PER_NODE),
                        "step_s": None if oom else step_s(r, d),
                        "published": f"{r['throughput']} {r['throughput_unit']}",
                        "device_memory_gib": float(r["device_memory_gib"]),
                        "peak_gib": float(peak) if peak and not oom else None,
                        "out_of_memory": oom, "memory_only": memory_only})
    return out
