"""The bottom layer everything that shows something may use: knob labels, Markdown
tables, figure files and diagnosis findings. It imports nothing else of autotune.

- :mod:`.figures`: figure files;
- :mod:`.findings`: what a diagnosis says;
- :mod:`.labels`: short names of knobs, a point's knob values in one line (tables, progress
  lines), and a share as a percentage (findings, reports);
- :mod:`.tables`: tables of DataFrames (Markdown, and plain text for the console), numbers
  formatted by column.
"""
