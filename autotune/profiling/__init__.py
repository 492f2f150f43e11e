"""Where the time goes: ``python -m autotune profile``, its diagnosis rules and its figure."""
