"""A soak: the chosen configuration run long, killed and resumed (``plan``, ``attempts``),
then judged (``stability``) and reported (``report``). The command:
autotune/commands/soak.py.

- :mod:`.attempts`: the launches of a soak;
- :mod:`.plan`: which trial a soak runs, for how many steps, where it kills and writes;
- :mod:`.report`: a soak's result;
- :mod:`.stability`: how stable a long run was, from its step records alone.
"""
