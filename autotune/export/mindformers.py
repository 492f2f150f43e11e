"""The tuned knobs under MindFormers' YAML keys, for users of that suite.

Only the keys autotune tuned or fixed are written; merge them into a full
MindFormers config (``run_mindformer.py --config ...``).
"""

from __future__ import annotations

from trials.contract.schema import Mode, TrialConfig, micro_batch_size

_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def mindformers_config(cfg: TrialConfig) -> dict:
    p, t = cfg.parallel, cfg.train
    return {
        "context": {
            # MindFormers: 0 = GRAPH_MODE, 1 = PYNATIVE_MODE.
            "mode": 0 if cfg.runtime.mode is Mode.graph else 1,
            "device_target": cfg.hardware.backend.value,
            "max_device_memory": f"{cfg.hardware.device_memory_gib:g}GB",
            "memory_optimize_level": cfg.runtime.memory_optimize_level.value,
            "jit_config": {"jit_level": cfg.runtime.jit_level.value},
        },
        "parallel_config": {
            "data_parallel": p.dp,
            "model_parallel": p.mp,
            "pipeline_stage": p.pp,
            "micro_batch_num": t.micro_batches if p.pp > 1 else 1,
        },
        "parallel": {
            "parallel_mode": 0 if p.mp == 1 and p.pp == 1 else 1,  # 0 data, 1 semi-auto
            "gradients_mean": True,
        },
        "recompute_config": {"recompute": bool(t.recompute)},
        "runner_config": {
            "batch_size": micro_batch_size(cfg),
            "gradient_accumulation_steps": t.micro_batches if p.pp == 1 else 1,
        },
        "model": {"model_config": {"compute_dtype": _DTYPES[cfg.precision.dtype.value],
                                   "param_init_type": "float32"}},
        "runner_wrapper": ({"scale_sense": {"type": "DynamicLossScaleUpdateCell",
                                            "loss_scale_value": cfg.precision.init_scale,
                                            "scale_factor": cfg.precision.scale_factor,
                                            "scale_window": cfg.precision.scale_window}}
                           if cfg.precision.loss_scale.value == "dynamic" else
                           {"scale_sense": 1.0}),
        "train_dataset": {"num_parallel_workers": cfg.data.num_workers,
                          "python_multiprocessing": bool(cfg.data.multiprocessing),
                          "prefetch_size": cfg.data.prefetch},
        "optimizer": {"learning_rate": t.lr, "weight_decay": t.weight_decay},
        "grad_clip": t.clip_norm,
    }
