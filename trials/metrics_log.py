"""The one writer of the metrics file: JSON lines, one event per line, flushed.

Readers (the orchestrator) tail the file while the trial runs, so each line is
written whole with a single ``write`` and flushed at once.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from trials.protocol import FORMAT_VERSION, Event


def _clean(value: Any) -> Any:
    """JSON-safe: numpy/MindSpore scalars to float, non-finite floats to strings."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isfinite(number):
        return number
    return "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")


class MetricsLog:
    """Writes events to ``path``; a no-op writer when ``path`` is None.

    A trial starts the file afresh; a production run that resumes (``append``)
    continues the file it wrote before.
    """

    def __init__(self, path: Path | None, *, append: bool = False) -> None:
        self.path = path
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115

    def emit(self, event: Event, **fields: Any) -> None:
        if self._file is None:
            return
        record = {"event": event.value, "time": time.time(), **_clean(fields)}
        if event is Event.START:
            record["format"] = FORMAT_VERSION
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        if event is Event.END:  # the line the launcher decides by
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
