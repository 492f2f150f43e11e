"""A user's own MindSpore workload, defined outside the autotune package.

Select it with ``workload.entry=tests.user_workload:make_workload``; autotune
applies its knobs (precision, mode, accumulation, data parallel ...) around it.
"""

from __future__ import annotations

from pathlib import Path

import mindspore.dataset as ds
import numpy as np
from mindspore import nn, ops

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


class MaskedMSELoss(nn.Cell):
    """The mean squared error of the samples whose error is finite: a user's guard against
    bad samples. Its forward pass stays finite on NaN inputs; its backward pass does not
    (the masked branch's gradient is 0 x NaN), so every such step's update is skipped."""

    def __init__(self, model: nn.Cell) -> None:
        super().__init__()
        self.model = model

    def construct(self, x, y):
        err = ops.square(self.model(x).astype(y.dtype) - y)
        finite = ops.isfinite(err)
        kept = ops.maximum(finite.astype(err.dtype).sum(), 1.0)
        return ops.where(finite, err, ops.zeros_like(err)).sum() / kept


class TurningNaN(Samples):
    """Every other sample's inputs NaN from sample ``nan_from`` on."""

    def __init__(self, nan_from: int) -> None:
        super().__init__()
        self.nan_from = nan_from

    def __getitem__(self, i: int):
        x, y = super().__getitem__(i)
        if i >= self.nan_from and i % 2:
            x = np.full_like(x, np.nan)
        return x, y


class TurningNaNWorkload(RegressionWorkload):
    """The regression whose inputs turn NaN at step ``workload.options.nan_from_step``
    (unshuffled, one micro-batch a step), under a loss that masks them: a finite loss, and
    from that step on no update."""

    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__(cfg)
        self.nan_from_step = int(cfg.options.get("nan_from_step", 5))

    def build_loss(self, model: nn.Cell) -> nn.Cell:
        return MaskedMSELoss(model)

    def build_dataset(self, data: DataConfig, *, batch_size: int, num_shards: int,
                      shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
        dataset = ds.GeneratorDataset(TurningNaN(self.nan_from_step * batch_size), ["x", "y"],
                                      shuffle=False, num_parallel_workers=data.num_workers,
                                      python_multiprocessing=data.multiprocessing)
        return dataset.batch(batch_size, drop_remainder=True).repeat()


def make_nan_workload(cfg: WorkloadConfig) -> Workload:
    return TurningNaNWorkload(cfg)
