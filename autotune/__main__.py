"""``python -m autotune``: see autotune/cli.py.

The command adopts its orphaned descendants (a trial's child that left the trial's
process group and dropped its marker) and kills what is left of them when it ends.
"""

import sys

from autotune.cli import main
from autotune.running.launcher import become_subreaper, kill_adopted

become_subreaper()
try:
    code = main()
finally:
    kill_adopted()
sys.exit(code)
