"""The tuning order as stages: correctness, memory, throughput, stability (``tune``)."""
