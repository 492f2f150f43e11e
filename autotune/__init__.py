"""autotune: an automated tuning orchestrator for MindSpore training jobs.

The orchestrator (this package) never imports MindSpore; the trial programs in
``trials/`` never import Optuna. Knob values go in as Hydra overrides, results
come back as JSON lines plus an exit code; the contract between the two halves is
``trials/contract/`` (the only part of ``trials`` this package imports).

- :mod:`.__main__`: ``python -m autotune``;
- :mod:`.cli`: command line;
- :mod:`.commands`: one module per CLI verb (``python -m autotune VERB``), each with
  ``run(composed, overrides, console) -> int``;
- :mod:`.export`: ``python -m autotune export``;
- :mod:`.help`: ``python -m autotune COMMAND --help``;
- :mod:`.plan`: plan before launch;
- :mod:`.presentation`: the bottom layer everything that shows something may use;
- :mod:`.profiling`: where the time goes;
- :mod:`.progress`: the sweep's progress;
- :mod:`.proposal`: one proposal's life;
- :mod:`.reference`: the documentation's reference pages, generated from the code;
- :mod:`.report`: the report side;
- :mod:`.running`: running trials;
- :mod:`.search`: the search side;
- :mod:`.settings`: typed schema of ``conf/sweep.yaml``;
- :mod:`.signals`: SIGTERM and SIGINT end a command cleanly;
- :mod:`.soak`: a soak;
- :mod:`.stages`: the tuning order as stages;
- :mod:`.study`: the study side;
- :mod:`.sweep`: the sweep;
- :mod:`.sweep_context`: what a sweep and the tuning stages share, built and checked once;
- :mod:`.testing`: fakes for testing the orchestrator, shipped with it (as
  ``optuna.testing`` is).
"""

__version__ = "0.1.0"
