"""The trial program: one short, real MindSpore training run of a configuration, in its
own process (``python -m trials.train``); it never imports Optuna.

- :mod:`.cache`: where a trial keeps what outlives it;
- :mod:`.calibrate`: peak FLOP/s of this machine per dtype, measured by a GEMM on a quiet
  host and cached;
- :mod:`.checkpoint`: production-mode checkpoints;
- :mod:`.commbench`: all-reduce bandwidth at several message sizes;
- :mod:`.compile_cache`: MindSpore's compile cache, one directory per configuration, so it
  never serves another;
- :mod:`.contract`: the contract between the orchestrator (``autotune``) and the trial
  program (``trials``);
- :mod:`.data`: input pipelines of the built-in workload;
- :mod:`.image_cnn`: a data-bound workload;
- :mod:`.job_summary`: the one line a production run ends with (``launch.sh`` of an exported
  job);
- :mod:`.measurement`: when a trial's warm-up ends and when it has measured enough, decided
  step by step;
- :mod:`.memory`: memory on a backend that reports none;
- :mod:`.mindformers_run`: train a MindFormers config with MindFormers' own Trainer, on any
  backend, the CPU included;
- :mod:`.mindformers_workload`: MindFormers models as autotune workloads;
- :mod:`.model`: the built-in workload's model;
- :mod:`.profiling`: a few steps under ``mindspore.profiler``, turned into where the time
  goes;
- :mod:`.runtime`: apply a trial's knobs through MindSpore 2.10's current APIs, one concern
  per module;
- :mod:`.step`: train-step Cells;
- :mod:`.train`: the trial program;
- :mod:`.trainer`: the training loop of a trial or a production run, read top to bottom;
- :mod:`.workload`: the workload interface.
"""
