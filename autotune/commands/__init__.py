"""One module per CLI verb (``python -m autotune VERB``), each with
``run(composed, overrides, console) -> int``: it reads the settings it needs from the
composed config and calls the library that does the work. ``autotune.cli`` imports a
verb's module only when that verb is chosen, so start-up stays light."""
