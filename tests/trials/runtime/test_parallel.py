"""trials.runtime.parallel: one device joins no group."""

from __future__ import annotations

import mindspore as ms

from trials.contract.schema import HardwareConfig, ParallelConfig, TrialConfig
from trials.runtime.parallel import init_parallel


def test_a_single_device_is_rank_0_of_1_and_sets_no_parallel_mode():
    before = ms.get_auto_parallel_context("parallel_mode")
    cfg = TrialConfig(hardware=HardwareConfig(name="cpu"), parallel=ParallelConfig())
    # Rule: dp x mp x pp = 1 -> (rank 0, world 1), without initialising communication.
    assert init_parallel(cfg) == (0, 1)
    assert ms.get_auto_parallel_context("parallel_mode") == before
