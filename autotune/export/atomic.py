"""An export directory put in place whole: at every moment, however an export is killed,
the destination holds a complete export (the old one or the new one) or, for a moment,
the old one sits complete beside it, where the next export restores it.

    write staging -> rename out to aside -> rename staging to out -> delete aside

Both directories live next to ``out`` (one filesystem, so each rename is atomic):
``.<out>~staging-XXXX`` (the new export being written) and ``.<out>~old-XXXX`` (the
previous one, moved aside). A killed export leaves them behind; :func:`recover`, run at
the start of the next export, puts an aside copy back when ``out`` is missing and
deletes every staging and aside directory (and the ``.<out>-XXXXXXXX`` ones of exports
written before this scheme).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from trials.contract.schema import ConfigError

STAGING = "~staging-"
ASIDE = "~old-"
#: Tests only (tests/export/test_export_atomic.py): the step at which an export stops, says so on
#: stdout and waits to be killed: written (one file staged), staged, aside, swapped.
PAUSE_ENV = "AUTOTUNE_TEST_EXPORT_PAUSE_AT"


def _pause_if_asked(step: str) -> None:
    if os.environ.get(PAUSE_ENV) == step:
        print(f"export paused at {step}", flush=True)
        time.sleep(3600)


def leftovers(out: Path) -> tuple[list[Path], list[Path]]:
    """Staging and aside directories that killed exports of ``out`` left beside it."""
    legacy = re.compile(re.escape(f".{out.name}-") + r"[a-z0-9_]{8}")  # tempfile.mkdtemp's
    staging, asides = [], []
    if not out.parent.is_dir():
        return staging, asides
    for path in out.parent.iterdir():
        if not path.is_dir() or path.is_symlink():
            continue
        if path.name.startswith(f".{out.name}{STAGING}") or legacy.fullmatch(path.name):
            staging.append(path)
        elif path.name.startswith(f".{out.name}{ASIDE}"):
            asides.append(path)
    return staging, asides


def recover(out: Path) -> list[str]:
    """Undo what killed exports of ``out`` left: restore the newest aside copy when ``out``
    is missing, delete the rest. What it did, one line each."""
    staging, asides = leftovers(out)
    done = []
    if not out.exists() and asides:
        newest = max(asides, key=lambda p: p.stat().st_mtime)
        newest.rename(out)
        asides.remove(newest)
        done.append(f"restored the previous export {out} from {newest.name} (an export "
                    "killed mid-way had moved it aside)")
    for path in staging + asides:
        shutil.rmtree(path, ignore_errors=True)
    if staging or asides:
        done.append(f"removed {len(staging) + len(asides)} directory(ies) that killed exports "
                    f"of {out.name} left beside it")
    return done


def write_atomically(out: Path, files: dict[str, str | bytes], *, overwrite: bool,
                     executable: tuple[str, ...] = ("launch.sh", "job.sbatch")) -> None:
    """Write ``files`` (relative paths: text or bytes) into a staging directory beside
    ``out``, then swap it into place; an existing export (``overwrite``) is deleted only
    once the new one is in place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}{STAGING}", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the export is meant to be shared
    aside: Path | None = None
    try:
        for name, content in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            if name in executable:
                (staging / name).chmod(0o755)
            _pause_if_asked("written")
        _pause_if_asked("staged")
        if out.exists():
            if not overwrite and any(out.iterdir()):
                raise ConfigError(f"{out} is not empty: set export.overwrite=true")
            aside = out.parent / f".{out.name}{ASIDE}{uuid.uuid4().hex[:8]}"
            out.rename(aside)
            _pause_if_asked("aside")
        staging.rename(out)
        _pause_if_asked("swapped")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if aside is not None and not out.exists():
            aside.rename(out)  # the old export back where it was
        elif aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
