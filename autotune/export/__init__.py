"""``python -m autotune export``: the chosen trial as a production job that runs as it is.

- :mod:`.job`: writes job.yaml, launch.sh, mindformers.yaml, provenance, CHANGES.md;
- :mod:`.carry`: the job's own copy of the trial program and workload, with digests;
- :mod:`.environment`: env.sh and requirements.txt (which Python runs the job);
- :mod:`.choose`: which trial (named, best confirmed, best feasible, headroom);
- :mod:`.changes`: what changed against the baseline, and the caveats;
- :mod:`.mindformers`: the knobs under MindFormers' YAML keys.
"""
