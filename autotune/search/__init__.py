"""The search side: the space of knobs and the rules that rule points out before launch.

- :mod:`.space`: knobs (override paths) and values, the baseline point, composition;
- :mod:`.feasibility`: structural rules, backend capability, OOM dominance;
- :mod:`.proposals`: the baseline first, its one-knob neighbours, then the sampler;
- :mod:`.unrepeated`: the sampler draws again rather than repeat a configuration.
"""
