"""The bottom layer everything that shows something may use: knob labels, Markdown
tables, figure files, diagnosis findings and the command line of a hint. It imports
nothing else of autotune.

- :mod:`.figures`: figure files;
- :mod:`.findings`: what a diagnosis says;
- :mod:`.invocation`: how a printed hint names this program (the interpreter that runs it);
- :mod:`.labels`: short names of knobs, a point's knob values in one line (tables, progress
  lines), a share as a percentage (findings, reports) and a size in KiB or MiB;
- :mod:`.tables`: tables of DataFrames (Markdown, and plain text for the console), numbers
  formatted by column.
"""
