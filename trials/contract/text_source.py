"""Which files of a directory the text data sources read, and whether they are enough.

The one rule for ``data.text_dir``, shared by the trial program (trials/data.py reads
the files) and the orchestrator (which checks the directory before anything runs, so
that a wrong path is one line at composition, not a crashed trial).
"""

from __future__ import annotations

from pathlib import Path

#: Suffixes of the text files read (sorted by path, up to ``data.max_bytes`` in all).
TEXT_SUFFIXES = (".py", ".txt", ".md", ".rst")


def text_files(root: Path, max_bytes: int) -> list[tuple[str, int]]:
    """(path, size) of the text files under root, sorted, up to max_bytes in total."""
    found, total = [], 0
    for path in sorted(root.rglob("*")):
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        size = path.stat().st_size
        found.append((str(path), size))
        total += size
        if total >= max_bytes:
            break
    return found


def window_bytes(seq_len: int) -> int:
    """Bytes of one training window: ``seq_len`` inputs and the label after the last."""
    return seq_len + 1


def text_dir_problem(text_dir: str, *, seq_len: int, max_bytes: int) -> str | None:
    """Why ``data.text_dir`` cannot feed a trial, naming the fix; None when it can."""
    root = Path(text_dir)
    where = f"data.text_dir={text_dir}"
    if not root.is_dir():
        return (f"{where} does not exist (or is not a directory): point it at a directory "
                f"of text files ({', '.join(TEXT_SUFFIXES)}), or leave it empty for the "
                "Python standard library's sources")
    if not root.is_absolute():
        return (f"{where} is relative, and each trial runs in its own directory: give it "
                f"as data.text_dir={root.resolve()}")
    files = text_files(root, max_bytes)
    if not files:
        return (f"{where} holds no text files ({', '.join(TEXT_SUFFIXES)}, searched "
                "recursively): add some, or point it elsewhere")
    if not any(size >= window_bytes(seq_len) for _, size in files):
        return (f"{where}: no text file is long enough for one window of "
                f"{window_bytes(seq_len)} bytes (workload.seq_len={seq_len} + 1): add longer "
                "files, or lower workload.seq_len")
    return None
