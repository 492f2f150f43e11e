"""Another revision's cost model on the same points: bench/cost_model_adapter.py run in a
subprocess of that revision's detached git worktree (bench/seam_overhead.py's machinery),
fed the request as JSON on stdin, its predictions read back as JSON from stdout.

The old revision predicts with its own code and its own conf/hardware priors. A profile it
does not have (one added since) is copied from this checkout into its worktree, and named
in the answer's ``copied_profiles``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.seam_overhead import Checkout, check_imports, git, remove_worktree, repo_root, resolve

ADAPTER = Path(__file__).resolve().parent / "cost_model_adapter.py"
TIMEOUT_S = 300


def copy_missing_profiles(request: dict, root: Path) -> list[str]:
    """Profiles the request names that the old worktree lacks, copied from this checkout."""
    here = repo_root() / "conf" / "hardware"
    names = {p["hardware"] for p in request["points"]} | {t["prior"] for t in request["tasks"]}
    copied = []
    for name in sorted(names):
        target = root / "conf" / "hardware" / f"{name}.yaml"
        if not target.exists():
            shutil.copyfile(here / f"{name}.yaml", target)
            copied.append(name)
    return copied


def predictions(rev: str, request: dict) -> dict:
    """The adapter's answer from revision ``rev`` (exit 2 when it is not a commit), with
    ``commit`` and ``copied_profiles`` added."""
    repo = repo_root()
    commit = resolve(repo, rev)
    tmp = Path(tempfile.mkdtemp(prefix="cost-model-old-"))
    checkout = Checkout("old", rev, commit, tmp / "old")
    git(repo, "worktree", "add", "--detach", "--quiet", str(checkout.root), commit)
    try:
        check_imports(checkout)
        copied = copy_missing_profiles(request, checkout.root)
        # -P: the adapter's own directory (this checkout's bench/) is not put on sys.path,
        # so it imports the old worktree's autotune and trials only.
        proc = subprocess.run([sys.executable, "-P", str(ADAPTER)], input=json.dumps(request),
                              cwd=checkout.root, env=checkout.env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"the cost model of {checkout.name} failed (rc "
                               f"{proc.returncode}):\n{proc.stderr[-3000:]}")
        answer = json.loads(proc.stdout)
    finally:
        remove_worktree(repo, checkout)
        shutil.rmtree(tmp, ignore_errors=True)
    return {**answer, "commit": commit, "copied_profiles": copied}
