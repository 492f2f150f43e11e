"""The search side: the space of knobs and the rules that rule points out before launch.

- :mod:`.baseline_checks`: the baseline re-measured while the sweep runs
  (``sweep.baseline_every=K``), so that every trial's gain is measured against a baseline
  run close to it in time;
- :mod:`.feasibility`: rules that reject a proposal before it costs a launch;
- :mod:`.filters`: what a proposal meets before it costs a launch;
- :mod:`.proposals`: where proposals come from;
- :mod:`.racing`: racing (``sweep.race.rounds=R``);
- :mod:`.space`: the search space as data;
- :mod:`.unrepeated`: a sampler that does not propose a configuration the study already has.
"""
