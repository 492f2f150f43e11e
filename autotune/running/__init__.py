"""Running trials: start a process group, watch it, stop it by rule, classify its end.

- :mod:`.launcher`: start (through the launch recipe) and kill a trial's processes;
- :mod:`.monitor`: follow the metrics file and the clocks; decide the outcome;
- :mod:`.pruning`: the slow rule;
- :mod:`.preflight`: checks before the first launch (the workload imports);
- :mod:`.confirm`: ``python -m autotune confirm``, re-runs of the finalists.
"""
