"""The study side: the database, the records read from it, and the questions asked of it.

- :mod:`.artifacts`: a study's files as Optuna artifacts, in a file-system store beside it;
- :mod:`.as_run`: a command that reads a stored study refuses an override of what it ran
  with;
- :mod:`.budget`: the launch budget and the study-wide questions the sweep asks before each
  proposal;
- :mod:`.choice`: which trial to export;
- :mod:`.claims`: one launch claim at a time per study, across threads, processes and
  machines;
- :mod:`.conditions`: the host's state while a run was measured, and the flags a reader
  needs to see;
- :mod:`.contrasts`: one-knob contrasts, the evidence a causal sentence about a knob rests on;
- :mod:`.confirm_progress`: how far a ``confirm`` got, kept on the study as each of its runs
  finishes;
- :mod:`.confirmation`: confirm's verdicts;
- :mod:`.connect`: connections to a database server that give up in time and let a signal
  through;
- :mod:`.data_bound`: is a trial input-bound? Its data wait, or its pipeline probe, says so;
- :mod:`.disk`: a full disk stops the sweep cleanly;
- :mod:`.faults`: what a storage error means;
- :mod:`.futility`: sweeps that cannot find anything;
- :mod:`.interruption`: a running trial that the sweep stops for a reason of its own (a
  signal, a full disk) is failed as ``interrupted`` and its configuration queued to run
  first next time;
- :mod:`.layout`: where a study's runs live on disk;
- :mod:`.noise`: is a difference real? Gains with intervals, and the test ``confirm``
  decides by;
- :mod:`.notes`: why a trial ended, as its optuna-dashboard note (Markdown);
- :mod:`.reaping`: trials left RUNNING by an orchestrator that is gone, and trials it was
  told to drop;
- :mod:`.records`: one readable record per Optuna trial;
- :mod:`.result`: how a launched trial ended;
- :mod:`.schema`: what a study stores, typed;
- :mod:`.scoring`: turn a trial's end into what Optuna stores;
- :mod:`.selection`: which trials count, which fit, which is best;
- :mod:`.stage_results`: stage results on the study;
- :mod:`.storage`: the study in its database;
- :mod:`.story`: the one sentence that says which trial export takes, why, and the figure it
  rests on;
- :mod:`.surviving`: a study storage that outlives what a database does;
- :mod:`.sweep_end`: how a sweep ends;
- :mod:`.twins`: a proposal whose configuration is already running elsewhere (another
  worker, another thread) waits for that twin and reuses its result instead of launching it
  twice;
- :mod:`.urls`: storage URLs as they may be shown;
- :mod:`.view`: one read of the study for one decision.
"""
