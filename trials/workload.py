"""The workload interface: what autotune needs of a model and its data to tune them.

A user workload lives in any importable module outside this package and is
selected with ``workload.entry=package.module:factory``. The factory takes the
:class:`~trials.contract.schema.WorkloadConfig` (its ``options`` dict is free-form) and
returns a :class:`Workload`. autotune then applies every knob around it:
precision, execution mode, accumulation, recompute, data parallel, guards.
See ``tests/user_workload.py`` for a complete example.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path

import mindspore.dataset as ds
from mindspore import nn

from trials.contract.knob_reach import DATA_KNOBS, Reach
from trials.contract.schema import ConfigError, DataConfig, WorkloadConfig
from trials.contract.units import TOKENS


class Workload(ABC):
    """A model plus its input pipeline."""

    #: Tokens one sample contributes to throughput (sequence length for an LM).
    tokens_per_sample: int = 1
    #: What throughput counts: "tokens" (an LM) or "samples" (tokens_per_sample = 1).
    unit: str = TOKENS
    #: The ``data.*`` knobs ``build_dataset`` honours (of num_workers, multiprocessing,
    #: source); a knob set away from its default that is not listed is refused before
    #: launch. ``data.prefetch`` needs no listing: autotune applies it to every pipeline.
    data_knobs: frozenset[str] = frozenset({"num_workers", "multiprocessing"})

    @abstractmethod
    def build_model(self) -> nn.Cell:
        """The network whose precision autotune sets (auto_mixed_precision is applied to it)."""

    @abstractmethod
    def build_loss(self, model: nn.Cell) -> nn.Cell:
        """A Cell whose ``construct(*columns)`` returns the scalar loss of one batch."""

    @abstractmethod
    def build_dataset(self, data: DataConfig, *, batch_size: int, num_shards: int,
                      shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
        """A batched, endlessly repeating dataset whose columns the loss Cell takes, in order.

        Honour ``data.num_workers`` / ``data.multiprocessing`` where the pipeline has
        Python work (and list them in :attr:`data_knobs`); autotune sets the prefetch
        size itself (``mindspore.dataset.config.set_prefetch_size``) before calling this.
        """

    def blocks(self, model: nn.Cell) -> list[nn.Cell]:
        """The Cells to recompute when ``train.recompute=full`` (default: none, and then
        ``train.recompute=full`` is refused as doing nothing)."""
        return []

    def takes_precision(self, dtype: str) -> bool:
        """Called before :meth:`build_model` with the trial's compute dtype. True: the
        model casts itself to it (autotune applies no ``auto_mixed_precision``); the
        default False lets autotune apply the precision knob."""
        return False

    def flops_per_token(self, model: nn.Cell) -> float | None:
        """Model FLOPs per token for MFU (PaLM convention); None = MFU not reported."""
        return None

    def shard(self, model: nn.Cell, *, dp: int, mp: int) -> None:
        """Tensor-parallel strategies for mp > 1 (Ascend/GPU); the default shards nothing."""


class GptWorkload(Workload):
    """The built-in GPT decoder trained on real text (see trials/model.py, trials/data.py)."""

    data_knobs = frozenset(DATA_KNOBS)

    def __init__(self, cfg: WorkloadConfig) -> None:
        self.cfg = cfg
        self.tokens_per_sample = cfg.seq_len

    def build_model(self) -> nn.Cell:
        from trials.model import GPT

        c = self.cfg
        return GPT(vocab_size=c.vocab_size, seq_len=c.seq_len, n_layers=c.n_layers,
                   d_model=c.d_model, n_heads=c.n_heads)

    def build_loss(self, model: nn.Cell) -> nn.Cell:
        from trials.model import LanguageModelLoss

        return LanguageModelLoss(model)

    def build_dataset(self, data: DataConfig, *, batch_size: int, num_shards: int,
                      shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
        from trials.data import build_dataset

        return build_dataset(data, seq_len=self.cfg.seq_len, vocab_size=self.cfg.vocab_size,
                             batch_size=batch_size, num_shards=num_shards, shard_id=shard_id,
                             seed=seed, cache_dir=cache_dir)

    def blocks(self, model: nn.Cell) -> list[nn.Cell]:
        return list(model.blocks)

    def shard(self, model: nn.Cell, *, dp: int, mp: int) -> None:
        from trials.model import shard_tensor_parallel

        shard_tensor_parallel(model, dp=dp, mp=mp)

    def flops_per_token(self, model: nn.Cell) -> float | None:
        from trials.model import palm_flops_per_token

        c = self.cfg
        return palm_flops_per_token(non_embedding_params=model.non_embedding_params(),
                                    n_layers=c.n_layers, n_heads=c.n_heads,
                                    head_dim=c.d_model // c.n_heads, seq_len=c.seq_len)


def reach_of(workload: Workload, name: str) -> Reach:
    """What ``workload`` applies, from its class alone (no model is built): it has
    recompute blocks when it overrides :meth:`Workload.blocks`."""
    return Reach(name, recompute=type(workload).blocks is not Workload.blocks,
                 data_knobs=frozenset(workload.data_knobs) & frozenset(DATA_KNOBS))


def load_workload(cfg: WorkloadConfig) -> Workload:
    """The built-in GPT, or the user factory named by ``workload.entry``."""
    if not cfg.entry:
        return GptWorkload(cfg)
    module_name, _, attr = cfg.entry.partition(":")
    if not attr:
        raise ConfigError(f"workload.entry={cfg.entry!r} must look like 'package.module:factory'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"workload.entry={cfg.entry!r} cannot be imported ({exc}); "
                          "check the name and PYTHONPATH") from exc
    workload = factory(cfg)
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload.entry={cfg.entry!r} returned {type(workload).__name__}, "
                          "not a trials.workload.Workload")
    return workload
