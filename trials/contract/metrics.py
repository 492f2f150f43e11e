"""The one writer and the one reader of the metrics file: JSON lines, one record per line.

The writer (the trial) writes each line whole with a single ``write`` and
flushes it at once; the reader (the orchestrator) tails the file by byte offset
while the trial runs. A last line without its newline is still being written:
it is left for the next read, as optuna's JournalFileBackend does.

Every line carries the run id of the launch that wrote it (``run``: the marker the
orchestrator puts in the trial's environment, new for every launch), and a reader
given a run id takes only that launch's lines: records an earlier run left in the
same file (a resumed production run appends to it) are never read as this one's.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from trials.contract.events import (
    FORMAT_VERSION,
    EndRecord,
    Record,
    StartRecord,
    record_from_json,
    record_to_json,
)
from trials.contract.jsonsafe import to_json
from trials.contract.launch import launch_run_id

#: The key of every line that names the launch which wrote it.
RUN_ID = "run"


class MetricsLog:
    """Writes records to ``path``; a no-op writer when ``path`` is None.

    A trial starts the file afresh; a production run that resumes (``append``)
    continues the file it wrote before. ``run_id`` defaults to the one the orchestrator
    gave this launch (none when started by hand: the lines then carry none).
    """

    def __init__(self, path: Path | None, *, append: bool = False,
                 run_id: str | None = None) -> None:
        self.path = path
        self.run_id = run_id or launch_run_id()
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115

    def emit(self, record: Record) -> None:
        if self._file is None:
            return
        line = {**to_json(record_to_json(record)), "time": time.time()}
        if self.run_id is not None:
            line[RUN_ID] = self.run_id
        if isinstance(record, StartRecord):
            line["format"] = FORMAT_VERSION
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._file.flush()
        if isinstance(record, EndRecord):  # the line the launcher decides by
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class MetricsReader:
    """Reads the records appended since the last call (complete lines only).

    ``run_id``: only the lines of that launch (a line without a run id, from a writer
    started by hand or a user's own program that does not stamp one, is taken too).
    ``from_end``: start at the file's current end, so that a run that continues a file
    (a resumed production run appends) is read from its own first record on. A file that
    shrank was started afresh by a new writer: it is read again from its start.
    """

    def __init__(self, path: Path, *, from_end: bool = False,
                 run_id: str | None = None) -> None:
        self.path = path
        self.run_id = run_id
        self.offset = 0
        if from_end:
            try:
                self.offset = path.stat().st_size
            except FileNotFoundError:
                pass

    def read_new(self) -> list[Record]:
        try:
            with open(self.path, "rb") as f:
                if f.seek(0, os.SEEK_END) < self.offset:
                    self.offset = 0
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        records = []
        for line in chunk[: end + 1].splitlines():
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:
                continue  # a corrupt line (e.g. a killed writer's partial flush): skip it
            if not isinstance(data, dict) or not self._ours(data):
                continue
            record = record_from_json(data)
            if record is not None:
                records.append(record)
        return records

    def _ours(self, line: dict) -> bool:
        """Whether a line belongs to the launch this reader follows."""
        return self.run_id is None or line.get(RUN_ID, self.run_id) == self.run_id
