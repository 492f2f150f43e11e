"""What a workload's throughput counts, and the one way every line, table and plot names
its rate.

A language model counts tokens; a workload whose samples are not token sequences (an
image classifier: ``trials/image_cnn.py``) counts samples (``Workload.unit``). The
trial records its unit in its performance layer (``Performance.unit``), so that what
reads a trial's figures names them as the trial measured them::

    rate("samples")              # "samples/s"
    rate("tokens", short=True)   # "tok/s"
"""

from __future__ import annotations

TOKENS = "tokens"
SAMPLES = "samples"
UNITS = (TOKENS, SAMPLES)
#: Where a narrow column abbreviates (progress lines, confirm's table).
_SHORT = {TOKENS: "tok"}


def rate(unit: str | None, *, short: bool = False) -> str:
    """``"<unit>/s"``; no unit recorded (an older trial) is tokens."""
    unit = unit or TOKENS
    return f"{_SHORT.get(unit, unit) if short else unit}/s"
