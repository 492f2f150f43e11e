"""Fakes for testing the orchestrator, shipped with it (as ``optuna.testing`` is).

- :mod:`~autotune.testing.script`: what a scripted trial does, as one plan;
- :mod:`~autotune.testing.fake_trial`: that plan played by a real process
  (``python -m autotune.testing.fake_trial``), for what only a process shows;
- :mod:`~autotune.testing.virtual`: the same plan, or a recorded run, played in virtual
  time by the real follow loop, with no process.
"""
