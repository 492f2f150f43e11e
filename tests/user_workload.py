"""A user's own MindSpore workload, defined outside the autotune package.

Select it with ``workload.entry=tests.user_workload:make_workload``; autotune
applies its knobs (precision, mode, accumulation, data parallel ...) around it.
"""

from __future__ import annotations

from pathlib import Path

import mindspore.dataset as ds
import numpy as np
from mindspore import nn

from trials.contract.schema import DataConfig, WorkloadConfig
from trials.contract.units import SAMPLES
from trials.workload import Workload


class Regression(nn.Cell):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.SequentialCell(nn.Dense(16, width), nn.ReLU(), nn.Dense(width, 1))

    def construct(self, x):
        return self.body(x)


class MSELoss(nn.Cell):
    def __init__(self, model: nn.Cell) -> None:
        super().__init__()
        self.model = model
        self.loss = nn.MSELoss()

    def construct(self, x, y):
        return self.loss(self.model(x).astype(y.dtype), y)


class Samples:
    """y = x . w + noise, deterministic per index."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self.w = np.random.default_rng(0).standard_normal((16, 1)).astype(np.float32)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int):
        x = np.random.default_rng(i).standard_normal(16).astype(np.float32)
        return x, (x @ self.w).astype(np.float32)


class RegressionWorkload(Workload):
    tokens_per_sample = 1
    unit = SAMPLES  # throughput in samples/s: a regression has no tokens

    def blocks(self, model: nn.Cell) -> list[nn.Cell]:
        return [model.body]  # what train.recompute=full recomputes

    def __init__(self, cfg: WorkloadConfig) -> None:
        self.width = int(cfg.options.get("width", 32))

    def build_model(self) -> nn.Cell:
        return Regression(self.width)

    def build_loss(self, model: nn.Cell) -> nn.Cell:
        return MSELoss(model)

    def build_dataset(self, data: DataConfig, *, batch_size: int, num_shards: int,
                      shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
        shard = {"num_shards": num_shards, "shard_id": shard_id} if num_shards > 1 else {}
        dataset = ds.GeneratorDataset(Samples(), ["x", "y"], shuffle=True,
                                      num_parallel_workers=data.num_workers,
                                      python_multiprocessing=data.multiprocessing, **shard)
        return dataset.batch(batch_size, drop_remainder=True).repeat()


def make_workload(cfg: WorkloadConfig) -> Workload:
    return RegressionWorkload(cfg)
