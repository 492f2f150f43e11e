"""trials.data: text windows as byte-level tokens, synthetic tokens, the built dataset."""

from __future__ import annotations

import numpy as np
import pytest

from trials.contract.schema import DataConfig, DataSource
from trials.data import SyntheticTokens, TextWindows, build_dataset, tokenize


def test_text_windows_are_seq_len_plus_one_bytes_stepping_by_seq_len(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"0123456789")
    b.write_bytes(b"abc")  # shorter than one window: no window from it
    windows = TextWindows([(str(a), 10), (str(b), 3)], seq_len=4)
    # Rule: window i is seq_len + 1 raw bytes at offsets 0, seq_len, 2 seq_len, ... of a file.
    assert len(windows) == 2
    assert bytes(windows[0][0]) == b"01234" and bytes(windows[1][0]) == b"45678"
    # Rule: no file long enough for one window is an error naming the fix.
    with pytest.raises(ValueError, match="data.text_dir"):
        TextWindows([(str(b), 3)], seq_len=4)


def test_tokenize_shifts_by_one_and_keeps_the_length_of_bad_utf8():
    x, y = tokenize(np.frombuffer(b"hello", dtype=np.uint8))
    # Rule: input is tokens[:-1], label tokens[1:] (the next byte), int32.
    assert x.tolist() == list(b"hell") and y.tolist() == list(b"ello") and x.dtype == np.int32
    # Rule: invalid UTF-8 is normalised, and the window keeps its length.
    x, y = tokenize(np.frombuffer(b"ab\xff\xfe", dtype=np.uint8))
    assert x.shape == (3,) and y.shape == (3,)


def test_synthetic_tokens_are_deterministic_per_index_and_in_vocab():
    src = SyntheticTokens(seq_len=8, vocab_size=5, size=10, seed=3)
    x, y = src[2]
    # Rule: the same index gives the same sample; labels are inputs shifted by one.
    assert np.array_equal(x, src[2][0]) and np.array_equal(x[1:], y[:-1])
    assert x.shape == (8,) and 0 <= x.min() and x.max() < 5 and len(src) == 10


@pytest.mark.slow
def test_build_dataset_gives_batches_of_input_and_label(tmp_path):
    data = DataConfig(source=DataSource.synthetic)
    dataset = build_dataset(data, seq_len=8, vocab_size=11, batch_size=2, num_shards=1,
                            shard_id=0, seed=0, cache_dir=tmp_path)
    x, y = next(dataset.create_tuple_iterator(num_epochs=1, output_numpy=True))
    # Rule: every source gives (input, label) int32 of shape (batch, seq_len).
    assert x.shape == y.shape == (2, 8) and x.dtype == np.int32
    assert np.array_equal(x[:, 1:], y[:, :-1])
