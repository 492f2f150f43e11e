"""bench._common: what every bench shares as a command."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import project_env

LONG = """
from bench._common import cli

def main():
    for i in range(100_000):
        print(f"row {i} " + "x" * 60)
    return 0

cli(main)
"""


def test_a_bench_piped_into_head_ends_quietly():
    """`python -m bench.X | head`: the reader goes away after a few rows."""
    proc = subprocess.Popen([sys.executable, "-c", LONG], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=project_env())
    proc.stdout.readline()
    proc.stdout.close()  # what head does once it has its lines
    _, err = proc.communicate(timeout=60)
    # Rule: exit code 1 and nothing on stderr (it printed a BrokenPipeError's traceback).
    assert proc.returncode == 1
    assert err == b""
