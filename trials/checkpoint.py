"""Production-mode checkpoints: safetensors every N steps, keep the last K, resume.

The step count lives in the file name (``step-00000050.safetensors``); a file is
written under a temporary name and renamed, so a crash never leaves a torn one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import mindspore as ms

_NAME = re.compile(r"^step-(\d{8})\.safetensors$")


def checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint, oldest first."""
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _NAME.match(p.name))]
    return sorted(found)


def save(ckpt_dir: Path, step: int, params: dict, keep: int) -> Path:
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    final = ckpt_dir / f"step-{step:08d}.safetensors"
    tmp = ckpt_dir / f".tmp-{os.getpid()}.safetensors"
    ms.save_checkpoint([{"name": name, "data": p} for name, p in params.items()], str(tmp),
                       format="safetensors")
    os.replace(tmp, final)
    for _, old in checkpoints(ckpt_dir)[:-keep]:
        old.unlink(missing_ok=True)
    return final


def restore_latest(ckpt_dir: Path, params: dict) -> int:
    """Load the newest checkpoint into ``params``; the step it was taken at (0 = none)."""
    found = checkpoints(ckpt_dir)
    if not found:
        return 0
    step, path = found[-1]
    saved = ms.load_checkpoint(str(path), format="safetensors")
    # load_checkpoint(strict) can silently load nothing: check names ourselves.
    missing = sorted(set(params) - set(saved))
    if missing:
        raise RuntimeError(f"checkpoint {path} lacks {len(missing)} parameters "
                           f"(e.g. {missing[0]}): it is from another configuration")
    for name, param in params.items():
        param.set_data(saved[name].astype(param.dtype))
    return step
