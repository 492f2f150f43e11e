"""Plan before launch: a calibrated model of memory and step time (pure Python).

- :mod:`.model_dims`: model dimensions, parameter counts, FLOPs per token;
- :mod:`.layout`: one job (split, batch, dtype, recompute, sharding) and its cluster;
- :mod:`.memory`: peak memory per device, one function per term;
- :mod:`.steptime`: step time per optimizer step, one function per term;
- :mod:`.predict`: both, with tokens/s, MFU and the model's uncertainty;
- :mod:`.calibration`: least-squares fit of the free constants; ``calibrate``'s stored fit;
- :mod:`.costmodel`: the model of one profile: predict a trial config, fit measured trials;
- :mod:`.fits`: which fit a study's commands use; a sweep's refits, stored in its study;
- :mod:`.plausible`: whether a fit's constants can describe the runs (else refused);
- :mod:`.planner` (enumerate, predict, rank) and :mod:`.plan_output` (tables, plan.md,
  the terminal lines): ``python -m autotune plan``; :mod:`.calibrate_csv`: ``calibrate``;
- :mod:`.simulate`: a simulated trial program (prediction + measured noise).
"""
