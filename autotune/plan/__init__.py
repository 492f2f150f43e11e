"""Plan before launch: a calibrated model of memory and step time (pure Python).

- :mod:`.calibrate_csv`: ``python -m autotune calibrate``'s work;
- :mod:`.calibration`: fit the cost model's free constants to measured trials (least
  squares), and keep the fit with its residual error;
- :mod:`.costmodel`: the cost model for one hardware profile;
- :mod:`.coverage`: which of a fit's per-dtype constants were measured, and what a plan in
  another dtype predicts with;
- :mod:`.figure`: ``plan.png``;
- :mod:`.fits`: which fit of the cost model a study's commands use, and where a study keeps
  its own;
- :mod:`.kernels`: the seconds one device's GEMMs take at the roofline, wave-quantised on
  its compute units;
- :mod:`.layout`: one job as the cost model sees it;
- :mod:`.learning`: the sweep's side of the cost model;
- :mod:`.measured_points`: measured training runs from a CSV, as the cost model sees them
  (``python -m autotune calibrate``);
- :mod:`.memory`: peak memory per device, one function per term, each checkable by hand;
- :mod:`.model_dims`: model dimensions and parameter counts, per architecture, checkable by
  hand;
- :mod:`.plan_output`: what ``python -m autotune plan`` shows and writes;
- :mod:`.planner`: enumerate every configuration of a workload on a cluster, predict each,
  rank them, and give every ruled-out point its reason;
- :mod:`.plausible`: whether a fit's constants can still describe the runs they were fitted
  to;
- :mod:`.predict`: the cost model's answer for one job;
- :mod:`.simulate`: a simulated trial;
- :mod:`.steptime`: step time per optimizer step, one function per term, each checkable by
  hand.
"""
