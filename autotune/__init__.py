"""autotune: an automated tuning orchestrator for MindSpore training jobs.

The orchestrator (this package) never imports MindSpore; the trial programs in
``trials/`` never import Optuna. Knob values go in as Hydra overrides, results
come back as JSON lines plus an exit code (trials/protocol.py).
"""

__version__ = "0.1.0"
