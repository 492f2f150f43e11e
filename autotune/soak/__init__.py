"""A soak: the chosen configuration run long, killed and resumed (``plan``, ``attempts``),
then judged (``stability``) and reported (``report``). The command:
autotune/commands/soak.py."""
