"""What a path setting must be, by its kind: the rule :func:`trials.contract.rules.rule`
declares beside the field (``rule(path=OUTPUT_DIR)``) and ``check_fields`` applies.

- :data:`OUTPUT_DIR`: a directory the command creates or writes into: if it exists, a
  directory; else its nearest existing ancestor a writable directory; never on a
  filesystem of the kernel's (``/proc``, ``/sys``, ``/dev``...), which takes no files.
- :data:`INPUT_DIR`, :data:`INPUT_FILE`: read: it exists, is of that kind, readable.

Each problem is one phrase that names what the path is and what to choose instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

OUTPUT_DIR = "output_dir"
INPUT_DIR = "input_dir"
INPUT_FILE = "input_file"
KINDS = (OUTPUT_DIR, INPUT_DIR, INPUT_FILE)

#: Filesystems that hold the kernel's objects, not files (a write there fails or is lost).
PSEUDO_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs",
    "securityfs", "pstore", "bpf", "configfs", "fusectl", "mqueue", "autofs", "binfmt_misc",
    "nsfs", "efivarfs", "rpc_pipefs", "hugetlbfs"})


def _mounts() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of every mount, longest mount point first."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    mounts = [(parts[1].replace("\\040", " "), parts[2])
              for parts in (line.split() for line in lines) if len(parts) >= 3]
    return sorted(mounts, key=lambda m: len(m[0]), reverse=True)


def filesystem_of(path: Path) -> tuple[str, str] | None:
    """(mount point, type) of the filesystem ``path`` (which exists) lives on."""
    real = os.path.realpath(path)
    for point, kind in _mounts():
        if real == point or real.startswith(point.rstrip("/") + "/"):
            return point, kind
    return None


def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _pseudo(existing: Path) -> str | None:
    mount = filesystem_of(existing)
    if mount is not None and mount[1] in PSEUDO_FILESYSTEMS:
        return (f"{mount[0]} is a {mount[1]} filesystem (the kernel's, which holds no files): "
                "choose a directory on a disk")
    return None


def location_problem(value: str, kind: str) -> str | None:
    """Why ``value`` cannot serve as a path of ``kind`` (one phrase), or None."""
    path = Path(os.path.expanduser(value))
    if kind == OUTPUT_DIR:
        if path.exists() and not path.is_dir():
            return ("is not a directory (a file or a device): choose a directory (it is "
                    "created if missing)")
        existing = _nearest_existing(path)
        if not existing.is_dir():
            return f"cannot be created: {existing} is a file, not a directory"
        if pseudo := _pseudo(existing):
            return pseudo
        if not os.access(existing, os.W_OK | os.X_OK):
            return (f"cannot be written: {existing} is not writable (its permissions or a "
                    "read-only mount): make it writable or choose another directory")
        return None
    if not path.exists():
        return "does not exist: check the path"
    if kind == INPUT_DIR and not path.is_dir():
        return "is not a directory: name the directory that holds the files"
    if kind == INPUT_FILE and not path.is_file():
        return "is not a file: name the file itself"
    if not os.access(path, os.R_OK):
        return "cannot be read: check its permissions"
    return None


def program_problem(program: str) -> str | None:
    """Why ``program`` (a command's first word) cannot be started, or None: a path that is
    not an executable file, or a bare name not on PATH."""
    if os.sep not in program:
        return None if shutil.which(program) else \
            "is not on PATH: give its full path, or install it"
    path = Path(os.path.expanduser(program))
    if not path.is_file():
        return "does not exist: check the path" if not path.exists() else \
            "is not a file: name the program itself"
    if not os.access(path, os.X_OK):
        return (f"is not executable: chmod +x {path}, or start the command with its "
                "interpreter, e.g. [python, my_trial.py]")
    return None
