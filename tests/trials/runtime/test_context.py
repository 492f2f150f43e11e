"""trials.runtime.context: device, mode, memory level, threads and seed, before the first op;
the jit level set on the step Cells in graph mode only."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mindspore import nn

from trials.contract.schema import HardwareConfig, JitLevel, Mode, TrialConfig
from trials.runtime.applied import jit_level
from trials.runtime.context import apply_jit_level


def test_apply_jit_level_sets_the_level_in_graph_mode_only():
    cfg = TrialConfig(hardware=HardwareConfig(name="cpu"))
    cfg.runtime.jit_level = JitLevel.O1
    cells = [nn.Dense(2, 2), nn.Dense(2, 2)]
    cfg.runtime.mode = Mode.pynative
    apply_jit_level(cells, cfg)
    # Rule: PyNative compiles nothing: no jit config is set.
    assert jit_level(cells) is None
    cfg.runtime.mode = Mode.graph
    apply_jit_level(cells, cfg)
    # Rule: in graph mode every step Cell gets runtime.jit_level.
    assert jit_level(cells) == "O1"


SET_UP = """
import mindspore as ms
from trials.contract.schema import HardwareConfig, Mode, MemoryLevel, TrialConfig
from trials.runtime.context import set_up_context
cfg = TrialConfig(hardware=HardwareConfig(name="cpu"))
cfg.runtime.mode = Mode.graph
cfg.runtime.memory_optimize_level = MemoryLevel.O1
cfg.train.seed = 77
set_up_context(cfg)
print(ms.get_context("mode") == ms.GRAPH_MODE, ms.get_context("device_target"),
      ms.get_context("memory_optimize_level"), ms.get_seed())
"""


@pytest.mark.slow
def test_set_up_context_sets_device_mode_memory_level_and_seed():
    # A fresh process: the device can only be set before the first kernel runs.
    out = subprocess.run([sys.executable, "-c", SET_UP], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "GLOG_v": "3"})
    # Rule: each setting reads back from MindSpore's own context.
    assert out.stdout.split() == ["True", "CPU", "1", "77"], out.stderr[-2000:]
