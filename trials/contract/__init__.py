"""The contract between the orchestrator (``autotune``) and the trial program (``trials``).

Everything both sides must agree on lives here, and nothing else: this package
imports neither MindSpore nor Optuna (``make lint`` enforces it with import-linter),
and ``autotune`` imports nothing else from ``trials``.

- :mod:`.schema`: the typed trial config (every knob, with its range) and its rules;
- :mod:`.rules`: the field-rule checker and :class:`ConfigError`;
- :mod:`.compose`: Hydra composition of ``conf/`` into that schema;
- :mod:`.capabilities`: what the hardware profile's backend can run;
- :mod:`.events`: the typed records a trial emits (start, step, summary, end);
- :mod:`.metrics`: the one writer and the one reader of the metrics file;
- :mod:`.outcomes`: how a trial ended, with exit codes and what each reason means;
- :mod:`.performance`: what a trial measured (:class:`Performance`), and the one
  definition of tokens/s, pooling of runs, loss spikes and MFU;
- :mod:`.jsonsafe`: how numbers travel as JSON (non-finite floats as "nan"/"inf");
- :mod:`.scorecard`: the four-layer scorecard, computed the same way on both sides;
- :mod:`.health`: whether a run trained at all (its measured updates mostly skipped);
- :mod:`.launch`: the one recipe (argv + environment) that starts a trial.
"""
