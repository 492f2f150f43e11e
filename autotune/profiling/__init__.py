"""Where the time goes: ``python -m autotune profile``, its diagnosis rules and its figure.

- :mod:`.figure`: the "Where the time goes" figure;
- :mod:`.profile`: one profile run;
- :mod:`.rules`: diagnosis rules over where a step's time goes, each quoting its numbers;
- :mod:`.winner`: the sweep's last act.
"""
