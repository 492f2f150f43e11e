"""trials.runtime.applied: what took effect, read back from MindSpore's own state."""

from __future__ import annotations

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import amp, nn

from trials.runtime.applied import (
    dataset_workers,
    dense_compute_dtype,
    jit_level,
    recomputed_cells,
)


def test_jit_level_and_recomputed_cells_are_read_from_the_cells():
    a, b, c = nn.Dense(2, 2), nn.Dense(2, 2), nn.Dense(2, 2)
    # Rule: no step Cell carries a jit config (PyNative): None.
    assert jit_level([a, b]) is None
    a.set_jit_config(ms.JitConfig(jit_level="O1"))
    b.set_jit_config(ms.JitConfig(jit_level="O1"))
    assert jit_level([a, b]) == "O1"
    c.set_jit_config(ms.JitConfig(jit_level="O0"))
    # Rule: step Cells compiled at different levels read "mixed".
    assert jit_level([a, c]) == "mixed"
    block = nn.Dense(2, 2)
    block.recompute()
    net = nn.SequentialCell([block, nn.ReLU()])
    # Rule: a Cell marked by recompute() counts once, even when two step Cells share it.
    assert recomputed_cells([net, net]) == ["0"]
    assert recomputed_cells([nn.Dense(2, 2)]) == []


def test_dense_compute_dtype_reads_the_mixed_precision_flags():
    # Rule: Dense layers without amp flags compute in fp32.
    assert dense_compute_dtype([nn.Dense(2, 2)]) == "fp32"
    half = amp.auto_mixed_precision(nn.SequentialCell([nn.Dense(2, 2)]), "O2",
                                    dtype=ms.float16)
    # Rule: auto_mixed_precision's flags say fp16; fp16 and fp32 Dense layers read "mixed".
    assert dense_compute_dtype([half]) == "fp16"
    assert dense_compute_dtype([half, nn.Dense(2, 2)]) == "mixed"


def test_dataset_workers_come_from_the_serialised_pipeline():
    pipeline = ds.GeneratorDataset([(np.zeros(3, np.float32),)] * 4, ["raw"],
                                   num_parallel_workers=1).map(
        operations=lambda x: x, input_columns=["raw"], num_parallel_workers=2
    ).batch(2).repeat()
    # Rule: each op that does the trial's data work, with its workers; Batch and Repeat
    # run with MindSpore's own defaults and are left out.
    assert dataset_workers(pipeline) == {"GeneratorDataset": 1, "Map": 2}


class Unserialisable:
    def to_json(self):
        raise RuntimeError("custom op")


def test_a_pipeline_that_cannot_be_serialised_is_not_guessed():

    # Rule: None, never a value taken from the config.
    assert dataset_workers(Unserialisable()) is None
