"""trials.cache and trials.compile_cache: where a trial's caches live, one compile cache per
configuration."""

from __future__ import annotations

import os
from pathlib import Path

from trials.cache import cache_dir
from trials.compile_cache import cache_key, enable
from trials.contract.schema import HardwareConfig, TrialConfig


def config(tmp_path: Path, **train) -> TrialConfig:
    cfg = TrialConfig(hardware=HardwareConfig(name="cpu"))
    cfg.data.cache_dir = str(tmp_path)
    for k, v in train.items():
        setattr(cfg.train, k, v)
    return cfg


def test_cache_dir_is_data_cache_dir_else_the_environment(tmp_path, monkeypatch):
    # Rule: data.cache_dir wins where set.
    assert cache_dir(config(tmp_path)) == tmp_path
    # Rule: otherwise $AUTOTUNE_CACHE.
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "env"))
    cfg = config(tmp_path)
    cfg.data.cache_dir = ""
    assert cache_dir(cfg) == tmp_path / "env"


def test_the_compile_cache_key_changes_with_the_graph_not_with_run_length(tmp_path):
    base = cache_key(config(tmp_path))
    # Rule: anything that shapes the graph (here the global batch) gives another key.
    assert cache_key(config(tmp_path, global_batch=16)) != base
    # Rule: the run and guard sections, and where the cache lives, are not in the key.
    longer = config(tmp_path / "elsewhere")
    longer.run.measure_steps += 7
    assert cache_key(longer) == base


def test_enable_points_mindspore_at_the_configurations_own_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("MS_COMPILER_CACHE_PATH", raising=False)
    monkeypatch.delenv("MS_COMPILER_CACHE_ENABLE", raising=False)
    cfg = config(tmp_path)
    # Rule: off unless run.compile_cache; then nothing is set.
    cfg.run.compile_cache = False
    assert enable(cfg) == {"enabled": False}
    assert "MS_COMPILER_CACHE_PATH" not in os.environ
    cfg.run.compile_cache = True
    first = enable(cfg)
    # Rule: the path is <cache>/compile/<key>, and an empty directory is not a hit.
    assert first == {"enabled": True, "key": cache_key(cfg), "hit": False}
    path = Path(os.environ["MS_COMPILER_CACHE_PATH"])
    assert path == tmp_path / "compile" / cache_key(cfg)
    assert os.environ["MS_COMPILER_CACHE_ENABLE"] == "1"
    # Rule: a directory already holding a compiled graph is a hit.
    (path / "graph.mindir").write_bytes(b"x")
    assert enable(cfg)["hit"] is True
