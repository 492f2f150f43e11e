"""Cost model against published accelerator training runs: uncalibrated (the profile's
priors) and leave-one-out calibrated (fitted on every other point of the same hardware).

    .venv/bin/python -m bench.cost_model_accel        # a few seconds, no trial runs

Reference points (every number is the source's; "implied" step times are computed from
the published throughput with the source's own FLOP formula):

[N21] D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
      Using Megatron-LM", SC'21, arXiv:2104.04473, Table 1 (A100 80 GB, 312 TFLOP/s peak,
      s = 2048, V = 51,200, activation recomputation; FLOPs per iteration eq. 3:
      96 B s l h^2 (1 + s/6h + V/16lh)). The micro-batch size is not stated: 1 is assumed;
      the interleaved schedule is not modelled.
[K22] V. Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
      Models", arXiv:2205.05198 (MLSys 2023), Tables 3 and 5: iteration time with full
      recompute and with sequence parallel + selective recompute (A100, dp = 1).
[MF]  MindSpore MindFormers, docs/model_cards/llama2.md "模型性能" and configs/llama2/*.yaml
      (commit 9719c5cd2, 2024-10-26; r1.3.0): tokens/s per NPU on Atlas 800T A2 (bf16,
      s = 4096). The Ascend 910B's GEMM peak (353.9 TFLOP/s bf16, its cube's, in
      conf/hardware/ascend_910b.yaml) is from CANN's platform file for the part; which 910B
      variant each card's runs used is not stated, and these errors include that.
[Z20] S. Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
      Models", SC'20, arXiv:1910.02054, section 3.1 and Figure 1 (7.5 B parameters, 64 GPUs):
      model states 120 GB (baseline data parallel) and 31.4 GB (optimizer states sharded).
"""

from __future__ import annotations

import math

import numpy as np

from autotune.plan import calibration
from autotune.plan.calibration import Measurement
from autotune.plan.layout import Cluster, Job, Recompute
from autotune.plan.model_dims import ModelDims, layer_params
from autotune.plan.predict import Constants, predict
from autotune.settings import SweepConfig
from bench._common import cli, print_table, write_result
from trials.contract.compose import compose
from trials.contract.schema import Arch, DType, to_trial_config

# name, heads, hidden, layers, t, p, GPUs, global batch, published TFLOP/s per GPU  [N21 T1]
MEGATRON = [("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137), ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
            ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
            ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
            ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
            ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
            ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
            ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
            ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
            ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163)]
# name, heads, hidden, layers, t, p, GPUs, global batch, micro-batch, s full, s present  [K22]
KORTHIKANTI = [("22B", 64, 6144, 48, 8, 1, 8, 4, 4, 1.42, 1.10),
               ("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 18.13, 13.75),
               ("530B", 128, 20480, 105, 8, 35, 280, 280, 1, 49.05, 37.83),
               ("1T", 160, 25600, 128, 8, 64, 512, 512, 1, 94.42, 71.49)]
# preset, dp, mp, pp, global batch, micro-batches, recompute, seq parallel, opt shard,
# NPUs, published tokens/s per NPU  [MF]
MINDFORMERS = [("llama2_7b", 8, 1, 1, 64, 8, "selective", False, True, 8, 4160),
               ("llama2_13b", 8, 1, 1, 32, 1, "full", False, True, 8, 1691),
               ("llama2_70b", 1, 4, 8, 256, 256, "selective", True, False, 32, 337)]


#: MindSpore's parallel optimizer as a ZeRO stage: in (semi-)auto parallel "the framework
#: saves the parameters as minimal slices and updates them in the optimizer" (MindSpore
#: 2.10 docs, features/parallel/optimizer_parallel.md): parameters, gradients and
#: optimizer states split across dp, gathered before use. How long the gathered copies
#: stay (``parallel_optimizer_comm_recompute``) is counted as the ZeRO-3 term does: two
#: layers' worth.
MF_SHARD_LEVEL = 3


def profile(name: str):
    return to_trial_config(compose("sweep", [f"hardware={name}"], schema=SweepConfig)).hardware


def megatron_flops(b: int, s: int, n_layers: int, h: int, v: int) -> float:
    """[N21] eq. 3 (with recomputation): FLOPs of one iteration."""
    return 96 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (16 * n_layers * h))


def gpt(heads: int, hidden: int, layers: int, seq: int = 2048, vocab: int = 51200) -> ModelDims:
    return ModelDims(arch=Arch.gpt, layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                     ffn=4 * hidden, seq=seq, vocab=vocab)


def points() -> list[dict]:
    a100, ascend = profile("gpu_a100"), profile("ascend_910b")
    out = []
    for name, a, h, layers, t, p, n, batch, tflops in MEGATRON:
        dp = n // (t * p)
        job = Job(dp=dp, mp=t, pp=p, global_batch=batch, micro_batches=batch // dp,
                  dtype=DType.float16, recompute=Recompute.full, fp32_main_grads=True)
        step = megatron_flops(batch, 2048, layers, h, 51200) / (tflops * 1e12 * n)
        out.append({"source": "N21 T1", "name": f"GPT {name}", "dims": gpt(a, h, layers),
                    "job": job,
                    "hw": a100, "nodes": math.ceil(n / 8), "step_s": step,
                    "published": f"{tflops} TFLOP/s/GPU"})
    for name, a, h, layers, t, p, n, batch, b, full_s, present_s in KORTHIKANTI:
        for rc, sp, step in ((Recompute.full, False, full_s),
                             (Recompute.selective, True, present_s)):
            job = Job(dp=1, mp=t, pp=p, global_batch=batch, micro_batches=batch // b,
                      dtype=DType.float16, recompute=rc, sequence_parallel=sp,
                      fp32_main_grads=True)
            out.append({"source": "K22 T5", "name": f"GPT {name} {rc.value}",
                        "dims": gpt(a, h, layers), "job": job, "hw": a100,
                        "nodes": math.ceil(n / 8), "step_s": step,
                        "published": f"{step} s/iteration"})
    for preset, dp, mp, pp, batch, m, rc, sp, shard, n, tps in MINDFORMERS:
        cfg = to_trial_config(compose("sweep", [f"workload={preset}"], schema=SweepConfig))
        d = ModelDims.of(cfg.workload)
        # The configs run FlashAttention (use_flash_attention: True) and MindSpore's
        # parallel optimizer (enable_parallel_optimizer: True; see MF_SHARD_LEVEL); MindSpore
        # overlaps the gradient reduction with the backward (bench/data/README.md,
        # overlap_grad_reduce).
        job = Job(dp=dp, mp=mp, pp=pp, global_batch=batch, micro_batches=m,
                  dtype=DType.bfloat16, recompute=Recompute(rc), sequence_parallel=sp,
                  shard_level=MF_SHARD_LEVEL if shard else 0, flash_attention=True,
                  overlap_grad_reduce=True)
        step = batch * d.seq / (tps * n)
        out.append({"source": "MF", "name": f"{preset} {job.split}", "dims": d, "job": job,
                    "hw": ascend, "nodes": math.ceil(n / 8), "step_s": step,
                    "published": f"{tps} tokens/s/NPU"})
    return out


def peak(pt: dict) -> float:
    return float(pt["hw"].peak_tflops[pt["job"].dtype.value]) * 1e12


def predicted_step(pt: dict, constants: Constants) -> float:
    return predict(pt["dims"], pt["job"], Cluster(pt["hw"], pt["nodes"]), constants,
                   peak_flops_per_device=peak(pt)).step_s


def measurement(pt: dict) -> Measurement:
    return Measurement(dims=pt["dims"], job=pt["job"], cluster=Cluster(pt["hw"], pt["nodes"]),
                       peak_flops_per_device=peak(pt), step_s=pt["step_s"])


def leave_one_out(pts: list[dict], i: int) -> Constants:
    """Fit on every other point of the same hardware profile (priors if too few)."""
    hw = pts[i]["hw"]
    others = [measurement(p) for j, p in enumerate(pts) if j != i and p["hw"].name == hw.name]
    return calibration.fit(others, Constants.priors(hw))


def zero_memory_points() -> list[dict]:
    """[Z20] Figure 1: model states of 7.5 B parameters on 64 data-parallel GPUs, at every
    shard level. ZeRO-3's figure counts the states alone; the model's two gathered layers
    (memory.parameter_bytes) are left out of the comparison and said apart."""
    from autotune.plan import memory

    d = gpt(32, 4096, 36)  # 7.5 B with V = 51,200 ([N21] Table 1 row)
    scale = 7.5e9 / (memory.stage_params(d, Job(dp=64, mp=1, pp=1, global_batch=64,
                                                micro_batches=1, dtype=DType.float16)))
    rows = []
    for label, level, published in (("baseline data parallel", 0, 120.0),
                                    ("optimizer states sharded (ZeRO-1)", 1, 31.4),
                                    ("and gradients (ZeRO-2)", 2, 16.6),
                                    ("and parameters (ZeRO-3)", 3, 1.9)):
        job = Job(dp=64, mp=1, pp=1, global_batch=64, micro_batches=1, dtype=DType.float16,
                  shard_level=level)
        gathered = 2 * layer_params(d) * 2 if level == 3 else 0.0
        states = (memory.parameter_bytes(d, job) - gathered + memory.gradient_bytes(d, job)
                  + memory.optimizer_bytes(d, job)) * scale / 1e9
        rows.append({"name": label, "published_gb": published, "predicted_gb": states,
                     "error": states / published - 1})
    return rows


def main() -> None:
    pts = points()
    rows, results = [], []
    for i, pt in enumerate(pts):
        prior = Constants.priors(pt["hw"])
        raw = predicted_step(pt, prior)
        loo = predicted_step(pt, leave_one_out(pts, i))
        results.append({"source": pt["source"], "name": pt["name"], "split": pt["job"].split,
                        "published": pt["published"], "step_s": pt["step_s"],
                        "uncalibrated_s": raw, "loo_s": loo,
                        "uncalibrated_error": raw / pt["step_s"] - 1,
                        "loo_error": loo / pt["step_s"] - 1})
        rows.append([pt["source"], pt["name"], pt["job"].split, pt["published"],
                     f"{pt['step_s']:.2f}", f"{raw:.2f}", f"{100 * (raw / pt['step_s'] - 1):+.1f}",
                     f"{loo:.2f}", f"{100 * (loo / pt['step_s'] - 1):+.1f}"])
    print_table(["source", "point", "dp x mp x pp", "published", "step s", "uncal. s", "err %",
                 "LOO s", "err %"], rows)
    summary = {}
    for source in ("N21 T1", "K22 T5", "MF"):
        part = [r for r in results if r["source"] == source]
        summary[source] = {
            "n": len(part),
            "uncalibrated_mape": float(np.mean([abs(r["uncalibrated_error"]) for r in part])),
            "loo_mape": float(np.mean([abs(r["loo_error"]) for r in part]))}
        print(f"{source}: {len(part)} points; step-time MAPE uncalibrated "
              f"{100 * summary[source]['uncalibrated_mape']:.1f} %, leave-one-out "
              f"{100 * summary[source]['loo_mape']:.1f} %")
    zero = zero_memory_points()
    print_table(["[Z20] model states, 7.5 B on 64 GPUs", "published GB", "predicted GB",
                 "err %"], [[z["name"], z["published_gb"], f"{z['predicted_gb']:.1f}",
                             f"{100 * z['error']:+.1f}"] for z in zero])
    path = write_result("cost_model_accel", {"points": results, "summary": summary,
                                             "zero": zero})
    print(f"wrote {path}")


if __name__ == "__main__":
    cli(main)
