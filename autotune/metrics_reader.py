"""The one reader of a trial's metrics file (writer: trials/metrics_log.py).

Tails the JSON-lines file by byte offset while the trial runs. A last line
without its newline is still being written: it is left for the next read, as
optuna's JournalFileBackend does.
"""

from __future__ import annotations

import json
from pathlib import Path


class MetricsReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read_new(self) -> list[dict]:
        """Events appended since the last call (complete lines only)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        events = []
        for line in chunk[: end + 1].splitlines():
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a corrupt line (e.g. a killed writer's partial flush): skip it
            if isinstance(event, dict) and "event" in event:
                events.append(event)
        return events
