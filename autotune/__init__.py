"""autotune: an automated tuning orchestrator for MindSpore training jobs.

The orchestrator (this package) never imports MindSpore; the trial programs in
``trials/`` never import Optuna. Knob values go in as Hydra overrides, results
come back as JSON lines plus an exit code; the contract between the two halves is
``trials/contract/`` (the only part of ``trials`` this package imports).
"""

__version__ = "0.1.0"
