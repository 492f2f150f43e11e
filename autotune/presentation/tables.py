"""Markdown tables of DataFrames, numbers formatted by column."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

#: Number formats of the Markdown tables, by column.
FORMATS = {"tokens/s": "{:,.0f}", "confirmed tok/s": "{:,.0f}", "samples/s": "{:,.0f}",
           "confirmed samples/s": "{:,.0f}", "MFU %": "{:.2f}",
           "peak GiB": "{:.3f}", "step s": "{:.4f}", "compile s": "{:.1f}",
           "change %": "{:+.1f}", "peak change GiB": "{:+.3f}"}


def cell(column: str, value: Any) -> str:
    """One value as a Markdown table cell ("-" for a missing one)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        if column in FORMATS:
            return FORMATS[column].format(value)
        return str(int(value)) if value.is_integer() else f"{value:g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (numbers right-aligned)."""
    if df.empty:
        return "(none)\n"
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
               for c in df.columns]
    lines = ["| " + " | ".join(str(c) for c in df.columns) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(cell(c, v) for c, v in zip(df.columns, row)) + " |")
    return "\n".join(lines) + "\n"
