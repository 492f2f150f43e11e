"""trials.contract.text_source: which text files feed a trial, and whether they are enough."""

from __future__ import annotations

from trials.contract.text_source import text_dir_problem, text_files, window_bytes


def test_text_files_reads_text_suffixes_sorted_and_stops_at_max_bytes(tmp_path):
    (tmp_path / "b.txt").write_text("x" * 100)
    (tmp_path / "a.py").write_text("y" * 100)
    (tmp_path / "c.bin").write_bytes(b"z" * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.md").write_text("w" * 100)
    # Rule: only the text suffixes, recursively, sorted by path.
    assert [p.rsplit("/", 1)[-1] for p, _ in text_files(tmp_path, 10_000)] == [
        "a.py", "b.txt", "d.md"]
    # Rule: reading stops once max_bytes is reached (the file that crosses it included).
    assert len(text_files(tmp_path, 150)) == 2


def test_text_dir_problem_names_the_fix(tmp_path):
    # Rule: a missing directory, a relative one, one without text, all say so.
    assert "does not exist" in text_dir_problem(str(tmp_path / "no"), seq_len=8,
                                                max_bytes=1000)
    (tmp_path / "junk.bin").write_bytes(b"1")
    assert "holds no text files" in text_dir_problem(str(tmp_path), seq_len=8, max_bytes=1000)
    # Rule: one window is seq_len + 1 bytes; a directory with no file that long cannot feed.
    assert window_bytes(8) == 9
    (tmp_path / "short.txt").write_text("12345678")
    assert "workload.seq_len=8" in text_dir_problem(str(tmp_path), seq_len=8, max_bytes=1000)
    (tmp_path / "long.txt").write_text("123456789")
    assert text_dir_problem(str(tmp_path), seq_len=8, max_bytes=1000) is None


def test_a_relative_text_dir_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    # Rule: each trial runs in its own directory, so a relative path is refused.
    assert "is relative" in text_dir_problem("rel", seq_len=8, max_bytes=1000)
