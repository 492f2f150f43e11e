"""The tuning order as stages: correctness, memory, throughput, stability (``tune``).

- :mod:`.correctness`: stage 1, correctness;
- :mod:`.data`: stage 3, data;
- :mod:`.memory`: stage 2, memory;
- :mod:`.throughput`: stage 4, throughput;
- :mod:`.verdicts`: one line per stage of ``tune``.
"""
