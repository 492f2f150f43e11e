"""Tables of DataFrames (Markdown, and plain text for the console), numbers formatted by
column."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd


def significant(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, never in exponent notation: a 12 ms step reads
    0.0120, not 0.01 (two decimals would print a fast step as 0.00)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    return f"{value:,.{decimals}f}"


#: Number formats of the tables, by column: a format string or a function.
FORMATS: dict[str, str | Callable[[float], str]] = {
    "tokens/s": "{:,.0f}", "confirmed tok/s": "{:,.0f}", "samples/s": "{:,.0f}",
    "confirmed samples/s": "{:,.0f}", "MFU %": "{:.2f}",
    "peak GiB": "{:.3f}", "states GiB": "{:.3f}", "activations GiB": "{:.3f}",
    "step s": significant, "compile s": "{:.1f}",
    "change %": "{:+.1f}", "peak change GiB": "{:+.3f}"}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(column: str, value: float) -> str:
    """A number as its column formats it (unknown columns: whole numbers bare, else four
    significant digits: 32.85, 0.8613, 12,346)."""
    fmt = FORMATS.get(column)
    if callable(fmt):
        return fmt(value)
    if fmt is not None:
        return fmt.format(value)
    return str(int(value)) if value.is_integer() else significant(value, 4)


def cell(column: str, value: Any) -> str:
    """One value as a Markdown table cell ("-" for a missing one)."""
    if _missing(value):
        return "-"
    if isinstance(value, float):
        return number(column, value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _numeric(df: pd.DataFrame) -> list[bool]:
    return [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
            for c in df.columns]


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (numbers right-aligned)."""
    if df.empty:
        return "(none)\n"
    lines = ["| " + " | ".join(str(c) for c in df.columns) + " |",
             "|" + "|".join("---:" if n else "---" for n in _numeric(df)) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(cell(c, v) for c, v in zip(df.columns, row)) + " |")
    return "\n".join(lines) + "\n"


def text_table(df: pd.DataFrame) -> str:
    """A fixed-width table for the console: numbers right-aligned, words left-aligned (a long
    word such as ``predicted_oom`` widens its own column only), "-" for a missing value."""
    numeric = _numeric(df)
    columns = []
    for name, is_number in zip(df.columns, numeric):
        cells = [cell(name, v).replace("\\|", "|") for v in df[name]]
        # An object column of numbers (e.g. whole-number runs with blanks) is still numbers.
        is_number = is_number or all(_missing(v) or isinstance(v, int | float) for v in df[name])
        width = max(len(str(name)), *(len(c) for c in cells)) if cells else len(str(name))
        align = str.rjust if is_number else str.ljust
        columns.append([align(str(name), width), *(align(c, width) for c in cells)])
    return "\n".join("  ".join(row).rstrip() for row in zip(*columns))
