"""The bottom layer everything that shows something may use: knob labels, Markdown
tables, figure files and diagnosis findings. It imports nothing else of autotune."""
