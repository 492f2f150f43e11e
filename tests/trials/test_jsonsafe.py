"""trials.contract.jsonsafe: non-finite numbers travel as strings and come back as floats."""

from __future__ import annotations

import json
import math

import numpy as np

from trials.contract.jsonsafe import float_of, to_json


def test_non_finite_floats_travel_as_strings_and_numpy_scalars_as_floats():
    out = to_json({"a": float("nan"), "b": [np.float32(1.5), float("inf")], 3: -math.inf,
                   "ok": True, "n": None, "i": 2})
    # Rule: JSON has no NaN/inf, so they become "nan"/"inf"/"-inf"; keys become strings.
    assert out == {"a": "nan", "b": [1.5, "inf"], "3": "-inf", "ok": True, "n": None, "i": 2}
    # Rule: the result is strict JSON (no bare NaN token).
    json.dumps(out, allow_nan=False)
    # Rule: numpy scalars become plain floats; bools stay bools (not 1.0).
    assert type(out["b"][0]) is float and out["ok"] is True


def test_float_of_reads_the_strings_back_and_nan_is_one_object():
    # Rule: "inf"/"-inf" read back as the infinities.
    assert float_of("inf") == math.inf and float_of("-inf") == -math.inf
    # Rule: anything not a number reads as NaN, and every NaN is the one math.nan object,
    # so tuples holding it compare equal after a round trip.
    assert float_of("nan") is math.nan and float_of(None) is math.nan
    assert float_of(float("nan")) is math.nan
    assert (1.0, float_of(to_json(float("nan")))) == (1.0, float_of("nan"))
    assert float_of(2) == 2.0
