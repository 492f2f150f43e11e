"""``python -m autotune``: see autotune/cli.py."""

import sys

from autotune.cli import main

sys.exit(main())
