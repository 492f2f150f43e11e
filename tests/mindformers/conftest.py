"""MindFormers writes its logs under ./output when imported; keep them out of the checkout."""

import os
import tempfile

os.environ.setdefault("LOCAL_DEFAULT_PATH",
                      tempfile.mkdtemp(prefix="autotune-mindformers-logs-"))
