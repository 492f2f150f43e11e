"""The study side: the database, the records read from it, and the questions asked of it.

- :mod:`.storage`: open/create the study, guard a resume (fingerprint);
- :mod:`.records`: one readable record per Optuna trial;
- :mod:`.budget`: launches claimed and counted, reuse look-ups, exhaustion;
- :mod:`.reaping`: trials whose orchestrator is gone or stopped, re-queued;
- :mod:`.scoring`: a trial's end told to Optuna (state, values, constraints);
- :mod:`.selection`: feasible, best, baseline, finalists, Pareto front.
"""
