"""``python -m autotune export``: the chosen trial as a production job that runs as it is.

- :mod:`.atomic`: an export directory put in place whole;
- :mod:`.carry`: what an exported job carries so that it runs away from this checkout, and
  where it came from;
- :mod:`.changes`: what the exported job changes against the baseline, what each change
  measured, and what to watch out for when it goes to production;
- :mod:`.environment`: the exported job's environment;
- :mod:`.job`: ``python -m autotune export``;
- :mod:`.mindformers`: the tuned job under MindFormers' YAML keys;
- :mod:`.mindformers_train`: the tuned job in the schema of MindFormers' PyNative trainer
  (``mindformers_train.yaml``);
- :mod:`.mindformers_transfer`: which tuned values may go into a MindFormers base config
  (``export.mindformers_base``).
"""
