"""Running trials: start a process group, watch it, stop it by rule, classify its end.

- :mod:`.commbench`: ``python -m autotune commbench``;
- :mod:`.conditions`: measure the host's state while a run is measured;
- :mod:`.confirm`: run ``confirm``;
- :mod:`.devices`: disjoint device sets for trials that run side by side on one machine;
- :mod:`.dispatch`: keep K trials in flight on a pool of devices
  (``sweep.parallel_trials=K``);
- :mod:`.job`: what a runner runs and what it hands back;
- :mod:`.launch`: one trial of a sweep, launched and followed;
- :mod:`.launcher`: start a trial as its own process group in its own directory;
- :mod:`.memory_evidence`: whether a trial that ended without an outcome of its own ran out
  of memory;
- :mod:`.monitor`: the one follow loop;
- :mod:`.preflight`: checks before the first launch that would otherwise fail every trial
  the same way;
- :mod:`.pruning`: pruning;
- :mod:`.repeat`: one more run of a configuration already written to a run directory,
  through the study's runner (locally, or as a SLURM job in a SLURM study) and the one
  follow loop;
- :mod:`.runner`: how a trial runs;
- :mod:`.slurm`: SLURM as the trial launcher (``sweep.launcher=slurm``), through submitit.
"""
