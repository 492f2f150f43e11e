"""trials.checkpoint: complete checkpoints by step, keep the last K, resume from the newest."""

from __future__ import annotations

import numpy as np
import pytest

from trials.checkpoint import checkpoints, restore_latest, save


def test_only_complete_checkpoints_are_listed_oldest_first(tmp_path):
    for name in ("step-00000020.safetensors", "step-00000005.safetensors",
                 ".tmp-123.safetensors", "step-5.safetensors", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    # Rule: the step is in the name (8 digits); temporaries and other files are not listed.
    assert [step for step, _ in checkpoints(tmp_path)] == [5, 20]
    # Rule: no directory, no checkpoints (a first run).
    assert checkpoints(tmp_path / "none") == []


@pytest.mark.slow
def test_save_keeps_the_last_k_and_restore_loads_the_newest(tmp_path):
    import mindspore as ms

    w = ms.Parameter(ms.Tensor(np.zeros(3, np.float32)), name="w")
    for step in (1, 2, 3):
        w.set_data(ms.Tensor(np.full(3, step, np.float32)))
        save(tmp_path, step, {"w": w}, keep=2)
    # Rule: only the newest `keep` checkpoints stay; no temporary file is left.
    assert [step for step, _ in checkpoints(tmp_path)] == [2, 3]
    assert not list(tmp_path.glob(".tmp-*"))
    w.set_data(ms.Tensor(np.zeros(3, np.float32)))
    # Rule: restore loads the newest and says its step.
    assert restore_latest(tmp_path, {"w": w}) == 3
    assert w.asnumpy().tolist() == [3.0, 3.0, 3.0]
    # Rule: a checkpoint lacking a parameter is from another configuration: refused.
    other = ms.Parameter(ms.Tensor(np.zeros(1, np.float32)), name="other")
    with pytest.raises(RuntimeError, match="another configuration"):
        restore_latest(tmp_path, {"w": w, "other": other})
    # Rule: nothing saved yet resumes at step 0.
    assert restore_latest(tmp_path / "empty", {"w": w}) == 0
