"""One module per CLI verb (``python -m autotune VERB``), each with
``run(composed, overrides, console) -> int``: it reads the settings it needs from the
composed config and calls the library that does the work. ``autotune.cli`` imports a
verb's module only when that verb is chosen, so start-up stays light.

- :mod:`.calibrate`: ``python -m autotune calibrate``;
- :mod:`.calibrate_host`: ``python -m autotune calibrate-host``;
- :mod:`.commbench`: ``python -m autotune commbench``;
- :mod:`.confirm`: ``python -m autotune confirm``;
- :mod:`.dashboard`: ``python -m autotune dashboard``;
- :mod:`.export`: ``python -m autotune export``;
- :mod:`.plan`: ``python -m autotune plan``;
- :mod:`.profile`: ``python -m autotune profile``;
- :mod:`.report`: ``python -m autotune report``;
- :mod:`.soak`: ``python -m autotune soak``;
- :mod:`.sweep`: ``python -m autotune sweep``;
- :mod:`.tune`: ``python -m autotune tune``.
"""
