"""Input pipelines of the built-in workload: real text as byte-level tokens.

Three sources share one shape of batch, ``(input, label)`` int32 ``(B, T)``:

* ``text``: windows of text files, read and tokenized on the fly by the dataset
  workers (a real CPU-side cost, so ``data.num_workers`` matters);
* ``mindrecord``: the same windows tokenized once into a MindRecord cache;
* ``synthetic``: random tokens, for measuring the model alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sysconfig
from pathlib import Path

import mindspore.dataset as ds
import numpy as np

from trials.contract.schema import DataConfig, DataSource
from trials.contract.text_source import text_files, window_bytes


def default_text_dir() -> Path:
    """A directory of real text on every machine: the standard library's sources."""
    return Path(sysconfig.get_paths()["stdlib"])


class TextWindows:
    """Random-access source: window i is ``seq_len + 1`` raw bytes of one file."""

    def __init__(self, files: list[tuple[str, int]], seq_len: int) -> None:
        span = window_bytes(seq_len)
        self.span = span
        self.paths = [path for path, _ in files]
        index = [(i, offset) for i, (_, size) in enumerate(files)
                 for offset in range(0, size - span + 1, seq_len)]
        if not index:
            raise ValueError("no text file is long enough for one window; set data.text_dir")
        self.index = np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int):
        file_index, offset = self.index[i]
        with open(self.paths[file_index], "rb") as f:
            f.seek(int(offset))
            raw = f.read(self.span)
        return (np.frombuffer(raw, dtype=np.uint8).copy(),)


def tokenize(raw: np.ndarray):
    """Bytes -> byte-level tokens; the decode/encode round trip normalises bad UTF-8."""
    text = raw.tobytes().decode("utf-8", errors="replace")
    tokens = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)[: raw.size].astype(np.int32)
    if tokens.size < raw.size:
        tokens = np.pad(tokens, (0, raw.size - tokens.size))
    return tokens[:-1], tokens[1:]


class SyntheticTokens:
    def __init__(self, seq_len: int, vocab_size: int, size: int, seed: int) -> None:
        self.seq_len, self.vocab_size, self.size, self.seed = seq_len, vocab_size, size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int):
        rng = np.random.default_rng(self.seed + i)
        tokens = rng.integers(0, self.vocab_size, self.seq_len + 1, dtype=np.int32)
        return tokens[:-1], tokens[1:]


def mindrecord_cache(windows: TextWindows, cache_dir: Path, key: str) -> Path:
    """Tokenize every window once into ``cache_dir``; safe when trials race to write it.

    MindRecord's index refers to its data file by name, so the pair is written in
    a private directory that is renamed into place whole.
    """
    from mindspore.mindrecord import FileWriter

    final = cache_dir / f"text-{key}"
    path = final / "tokens.mindrecord"
    if path.exists():
        return path
    tmp = cache_dir / f".tmp-{os.getpid()}-{key}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    writer = FileWriter(str(tmp / path.name), shard_num=1, overwrite=True)
    writer.add_schema({"input": {"type": "int32", "shape": [-1]},
                       "label": {"type": "int32", "shape": [-1]}}, "tokens")
    rows = []
    for i in range(len(windows)):
        x, y = tokenize(windows[i][0])
        rows.append({"input": x, "label": y})
        if len(rows) == 1024:
            writer.write_raw_data(rows)
            rows = []
    if rows:
        writer.write_raw_data(rows)
    writer.commit()
    try:
        os.rename(tmp, final)
    except OSError:  # another trial finished first: use its cache
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def build_dataset(data: DataConfig, *, seq_len: int, vocab_size: int, batch_size: int,
                  num_shards: int, shard_id: int, seed: int, cache_dir: Path) -> ds.Dataset:
    """Batched, endlessly repeating dataset of (input, label) for one rank (the trainer
    has set ``data.prefetch`` already, as for every workload)."""
    ds.config.set_seed(seed)
    shard = {"num_shards": num_shards, "shard_id": shard_id} if num_shards > 1 else {}
    workers = data.num_workers
    if data.source is DataSource.synthetic:
        source = SyntheticTokens(seq_len, vocab_size, size=4096, seed=seed)
        dataset = ds.GeneratorDataset(source, ["input", "label"], shuffle=False,
                                      num_parallel_workers=workers,
                                      python_multiprocessing=data.multiprocessing, **shard)
    else:
        root = Path(data.text_dir) if data.text_dir else default_text_dir()
        windows = TextWindows(text_files(root, data.max_bytes), seq_len)
        if data.source is DataSource.mindrecord:
            key = hashlib.sha1(f"{root}|{seq_len}|{data.max_bytes}".encode()).hexdigest()[:12]
            path = mindrecord_cache(windows, cache_dir, key)
            dataset = ds.MindDataset(str(path), columns_list=["input", "label"],
                                     num_parallel_workers=workers, shuffle=True, **shard)
        else:
            dataset = ds.GeneratorDataset(windows, ["raw"], shuffle=True,
                                          num_parallel_workers=workers,
                                          python_multiprocessing=data.multiprocessing, **shard)
            dataset = dataset.map(operations=tokenize, input_columns=["raw"],
                                  output_columns=["input", "label"],
                                  num_parallel_workers=workers,
                                  python_multiprocessing=data.multiprocessing)
    return dataset.batch(batch_size, drop_remainder=True).repeat()
