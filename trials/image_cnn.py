"""A data-bound workload: a small CNN classifier on synthetic images with Python augmentation.

What a new user's image job looks like: per-sample preprocessing written in Python
(random crop, horizontal flip, colour jitter) inside ``GeneratorDataset.map``, so the
input pipeline, not the model, sets the pace. Two dials make it as data-bound as a
test needs (``workload.options``):

* ``augment_passes``: colour-jitter passes per sample (CPU cost that competes with the
  step for the cores: the case data wait alone misses);
* ``io_wait_ms``: a sleep per sample in the source (slow storage: the step waits).

Select it with ``workload=image_cnn`` (conf/workload/image_cnn.yaml)::

    python -m trials.train workload=image_cnn data.num_workers=2
    python -m autotune sweep workload=image_cnn search=data sweep.study=img
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn

from trials.contract.schema import DataConfig, WorkloadConfig
from trials.contract.units import SAMPLES
from trials.workload import Workload


class SmallCNN(nn.Cell):
    """Two conv-ReLU-pool stages and a linear head: (B, 3, S, S) -> (B, classes)."""

    def __init__(self, image_size: int, width: int, n_classes: int) -> None:
        super().__init__()
        self.features = nn.SequentialCell(
            nn.Conv2d(3, width, 3, pad_mode="same"), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(width, 2 * width, 3, pad_mode="same"), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.flatten = nn.Flatten()
        self.head = nn.Dense(2 * width * (image_size // 4) ** 2, n_classes)

    def construct(self, x):
        return self.head(self.flatten(self.features(x)))  # (B, classes)


class ClassifierLoss(nn.Cell):
    def __init__(self, model: nn.Cell) -> None:
        super().__init__()
        self.model = model
        self.loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, image, label):
        return self.loss(self.model(image).astype(ms.float32), label)


class SyntheticImages:
    """Image i: ``size x size x 3`` uint8 whose class is its mean brightness band, so the
    labels are learnable; ``io_wait_s`` per read emulates slow storage."""

    def __init__(self, *, count: int, size: int, n_classes: int, io_wait_s: float) -> None:
        self.count, self.size, self.n_classes, self.io_wait_s = count, size, n_classes, io_wait_s

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int):
        if self.io_wait_s:
            time.sleep(self.io_wait_s)
        label = i % self.n_classes
        rng = np.random.default_rng(i)
        level = 255 * (label + 0.5) / self.n_classes
        image = np.clip(rng.normal(level, 40, (self.size, self.size, 3)), 0, 255)
        return image.astype(np.uint8), np.int32(label)


class Augment:
    """Random crop, horizontal flip and ``passes`` colour-jitter passes, in Python, per
    sample; returns a float32 CHW image in [0, 1]. The draws are seeded by the run's seed
    and the sample itself: a run resumed from a checkpoint replays the same batches (an
    unseeded draw made every resume of this workload read as broken: soak's replayed
    steps differed by up to 61 %)."""

    def __init__(self, crop: int, passes: int, seed: int = 0) -> None:
        self.crop, self.passes, self.seed = crop, passes, seed

    def __call__(self, image: np.ndarray) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(image.tobytes())])
        top, left = rng.integers(0, image.shape[0] - self.crop + 1, 2)
        x = image[top:top + self.crop, left:left + self.crop].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            x = x[:, ::-1]
        for _ in range(self.passes):  # brightness, contrast, saturation
            x = x * rng.uniform(0.9, 1.1)
            x = (x - x.mean()) * rng.uniform(0.9, 1.1) + x.mean()
            grey = x.mean(axis=2, keepdims=True)
            x = np.clip((x - grey) * rng.uniform(0.9, 1.1) + grey, 0.0, 1.0)
        return np.ascontiguousarray(x.transpose(2, 0, 1))


class ImageCNNWorkload(Workload):
    """Throughput is in samples: one "token" per image."""

    tokens_per_sample = 1
    unit = SAMPLES

    def __init__(self, cfg: WorkloadConfig) -> None:
        o = cfg.options
        self.image_size = int(o.get("image_size", 32))
        self.source_size = int(o.get("source_size", self.image_size + 8))
        self.width = int(o.get("width", 8))
        self.n_classes = int(o.get("n_classes", 10))
        self.augment_passes = int(o.get("augment_passes", 4))
        self.io_wait_s = float(o.get("io_wait_ms", 0.0)) / 1000.0
        self.count = int(o.get("count", 2048))

    def build_model(self) -> nn.Cell:
        return SmallCNN(self.image_size, self.width, self.n_classes)

    def build_loss(self, model: nn.Cell) -> nn.Cell:
        return ClassifierLoss(model)

    def build_dataset(self, data: DataConfig, *, batch_size: int, num_shards: int,
                      shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
        shard = {"num_shards": num_shards, "shard_id": shard_id} if num_shards > 1 else {}
        source = SyntheticImages(count=self.count, size=self.source_size,
                                 n_classes=self.n_classes, io_wait_s=self.io_wait_s)
        # The source's workers read (and wait on storage); the map's workers augment.
        dataset = ds.GeneratorDataset(source, ["image", "label"], shuffle=True,
                                      num_parallel_workers=data.num_workers,
                                      python_multiprocessing=data.multiprocessing, **shard)
        dataset = dataset.map(operations=Augment(self.image_size, self.augment_passes, seed),
                              input_columns=["image"], num_parallel_workers=data.num_workers,
                              python_multiprocessing=data.multiprocessing)
        return dataset.batch(batch_size, drop_remainder=True).repeat()


def make_workload(cfg: WorkloadConfig) -> Workload:
    return ImageCNNWorkload(cfg)
