"""How numbers travel as JSON, for every writer: the metrics file, Optuna user attributes,
a soak's result.

JSON has no NaN or infinity, so a non-finite float travels as the string ``"nan"``,
``"inf"`` or ``"-inf"`` and is read back as that float (:func:`float_of`). One encoding
everywhere, so a reader never has to guess whether ``None`` meant "not measured" or
"measured, and it was NaN": ``None`` means only the first.
"""

from __future__ import annotations

import math
from typing import Any


def to_json(value: Any) -> Any:
    """JSON-safe: numpy/MindSpore scalars to float, non-finite floats to strings."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isfinite(number):
        return number
    return "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")


def float_of(value: Any) -> float:
    """A float from JSON, where non-finite values travel as "nan"/"inf"/"-inf".

    Anything that is not a number reads as NaN. NaN is always the one ``math.nan`` object,
    so records holding it compare equal after a round trip (a tuple compares by identity
    first, and NaN is unequal to every other NaN).
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return math.nan if math.isnan(number) else number
