"""The contract between the orchestrator (``autotune``) and the trial program (``trials``).

Everything both sides must agree on lives here, and nothing else: this package
imports neither MindSpore nor Optuna (``make lint`` enforces it with import-linter),
and ``autotune`` imports nothing else from ``trials``.

- :mod:`.breakdown`: where a step's time goes, from profiler op events and the trial's own
  step clock;
- :mod:`.capabilities`: what the backend can run, from the hardware profile alone
  (``hardware.supports``);
- :mod:`.compose`: compose ``conf/`` with Hydra's compose API;
- :mod:`.config_files`: a value a config-group file holds that its schema refuses, as the
  file, line, key, value and expected type;
- :mod:`.events`: the events a trial reports, as typed records;
- :mod:`.health`: whether a run trained at all: most updates skipped is not healthy,
  whatever the loss says;
- :mod:`.hostload`: how busy the rest of this machine is;
- :mod:`.jsonsafe`: how numbers travel as JSON, for every writer;
- :mod:`.knob_reach`: which knobs a workload can apply;
- :mod:`.launch`: the one recipe for starting a trial;
- :mod:`.machine`: this machine's identity and its cached CPU peak FLOP/s (measured by
  trials/calibrate.py);
- :mod:`.metrics`: the one writer and the one reader of the metrics file;
- :mod:`.mindformers`: MindFormers YAML configs, read without MindFormers;
- :mod:`.outcomes`: how a trial ended;
- :mod:`.paths`: what a path setting must be, by its kind (a directory written, a file
  read);
- :mod:`.performance`: what a trial measured, as one typed record, and the one definition of
  each number in it;
- :mod:`.rules`: field rules declared beside each schema field, and the one checker that
  applies them;
- :mod:`.schema`: typed schema of a trial's configuration (plain Python, no MindSpore);
- :mod:`.scorecard`: the four-layer scorecard of a trial, computed from its step records;
- :mod:`.stats`: statistics both sides share;
- :mod:`.text_source`: which files of a directory the text data sources read, and whether
  they are enough;
- :mod:`.trial_dir`: the run directory of one trial process;
- :mod:`.units`: what a workload's throughput counts, and the one way every line, table and
  plot names its rate;
- :mod:`.vocabulary`: the words users write for precision, recompute and the device split.
"""
