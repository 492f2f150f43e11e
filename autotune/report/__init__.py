"""The report side: what a study says, as tables, figures and words.

- :mod:`.command`: ``python -m autotune report`` (writes every file below);
- :mod:`.leaderboard`: the table at the end of a sweep;
- :mod:`.importance`: each knob's effect on tokens/s and on the share of trials stopped;
- :mod:`.tables`, :mod:`.plots`, :mod:`.diagnosis`, :mod:`.prediction`, :mod:`.index`.

Importing this package loads nothing heavy: the sweep imports the leaderboard alone,
without matplotlib.
"""
