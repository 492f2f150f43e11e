"""The report side: what a study says, as tables, figures and words.

- :mod:`.diagnosis`: diagnosis in words;
- :mod:`.importance`: knob importance;
- :mod:`.index`: the report's front page;
- :mod:`.leaderboard`: the table at the end of a sweep (and the start of a report);
- :mod:`.plots`: the report's figures as PNG files (matplotlib, no display, no pyplot
  state);
- :mod:`.prediction`: how well the cost model predicted the trials it let through;
- :mod:`.stages`: the report's "Tuning stages" section;
- :mod:`.tables`: the report's tables;
- :mod:`.where_time_goes`: the report's "Where the time goes" section.

Importing this package loads nothing heavy: the sweep imports the leaderboard alone,
without matplotlib.
"""
