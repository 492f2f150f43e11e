"""MindSpore's compile cache, one directory per configuration, so it never serves another.

MindSpore keys its cache (``MS_COMPILER_CACHE_ENABLE`` / ``MS_COMPILER_CACHE_PATH``)
by the source only: on this CPU, a changed batch or width then fails, and a changed
depth gave NaN losses silently (docs/mindspore-cpu.md). So every configuration gets
its own directory, named by a hash of everything that shapes the graph: the resolved
config (without the ``run`` and ``guard`` sections, which only say how long to run
and when to stop), the trial program's source, the user's workload module, and the
MindSpore and Python versions. Repeats of one configuration (confirm, racing, a
retried trial) then skip most of the first step's compilation.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from omegaconf import OmegaConf

from trials.cache import cache_dir
from trials.contract.schema import TrialConfig

TRIALS_DIR = Path(__file__).resolve().parent
#: Sections that never change a compiled graph.
NOT_IN_KEY = ("run", "guard")


def _source_digest(cfg: TrialConfig) -> str:
    digest = hashlib.sha256()
    files = sorted(TRIALS_DIR.rglob("*.py"))
    if cfg.workload.entry:
        spec = importlib.util.find_spec(cfg.workload.entry.split(":")[0])
        if spec is not None and spec.origin:
            files.append(Path(spec.origin))
    for path in files:
        digest.update(str(path.relative_to(path.anchor)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(cfg: TrialConfig) -> str:
    """The hash that names this configuration's cache directory."""
    resolved = OmegaConf.to_container(OmegaConf.structured(cfg), enum_to_str=True)
    for section in NOT_IN_KEY:
        resolved.pop(section, None)
    resolved.get("data", {}).pop("cache_dir", None)
    try:
        mindspore = version("mindspore")
    except PackageNotFoundError:
        mindspore = "unknown"
    payload = json.dumps({"config": resolved, "source": _source_digest(cfg),
                          "mindspore": mindspore, "python": sys.version}, sort_keys=True,
                         default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def enable(cfg: TrialConfig) -> dict:
    """Point MindSpore at this configuration's cache (before MindSpore is imported).

    Returns what the start event reports: the key, and whether the cache already held
    a compiled graph (a hit)."""
    if not cfg.run.compile_cache:
        return {"enabled": False}
    path = cache_dir(cfg) / "compile" / cache_key(cfg)
    hit = path.is_dir() and any(path.rglob("*"))
    path.mkdir(parents=True, exist_ok=True)
    os.environ["MS_COMPILER_CACHE_ENABLE"] = "1"
    os.environ["MS_COMPILER_CACHE_PATH"] = str(path)
    return {"enabled": True, "key": path.name, "hit": hit}
