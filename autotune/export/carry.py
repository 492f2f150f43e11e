"""What an exported job carries so that it runs away from this checkout, and where it came
from.

The job runs its own copy of the trial program (``src/trials/``, as it is in this
checkout now: what the study's trials ran) and, for a user's workload, its module or
package (``src/<module>``, found where a trial found it: the working directory or
PYTHONPATH). ``launch.sh`` puts ``src/`` first on PYTHONPATH, so nothing of this checkout
is needed. ``SHA256SUMS`` lists every carried file (``sha256sum -c SHA256SUMS`` checks the
copy); ``provenance.json`` holds the source commit, whether the tree was dirty, and one
digest per part (the sha256 of that part's lines of ``SHA256SUMS``).

    carried = carry(job)            # files, provenance, modules launch.sh checks
    job_yaml(carried.job_config(job))  # a MindFormers workload's YAML: the carried copy
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

from trials.contract.launch import PROJECT_ROOT
from trials.contract.mindformers import ADAPTER_ENTRY, OPTION_CONFIG
from trials.contract.schema import ConfigError, TrialConfig

#: Where carried code lives inside the job directory (launch.sh puts it on PYTHONPATH).
SRC = "src"
PROGRAM = "trials"
#: A workload package larger than this is not copied: install it into the job's
#: environment instead (a package of site-packages is taken from there).
MAX_CARRIED_BYTES = 50 * 2**20


@dataclass
class Carried:
    """``files``: job-relative path -> bytes; ``provenance``: the "source" section;
    ``modules``: top-level modules launch.sh checks before it starts the job."""

    files: dict[str, bytes] = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)
    #: Job-relative path of the carried MindFormers YAML the workload builds its model from
    #: (job.yaml's ``workload.options.config``), or None.
    workload_config: str | None = None

    def job_config(self, job: TrialConfig) -> TrialConfig:
        """``job`` as job.yaml holds it: the workload's YAML read from the carried copy."""
        if self.workload_config is None:
            return job
        workload = dataclasses.replace(job.workload, options={**job.workload.options,
                                                              OPTION_CONFIG: self.workload_config})
        return dataclasses.replace(job, workload=workload)

    def sha256sums(self) -> str:
        return "".join(_sum_line(path, data) for path, data in sorted(self.files.items()))


def _sum_line(path: str, data: bytes) -> str:
    return f"{hashlib.sha256(data).hexdigest()}  {path}\n"


def digest(files: dict[str, bytes]) -> str:
    """sha256 of the files' ``SHA256SUMS`` lines (path-sorted): one figure for a part."""
    lines = "".join(_sum_line(path, data) for path, data in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _tree(root: Path, under: str) -> dict[str, bytes]:
    """Every file of ``root`` (a directory, or one module file) as ``under/...`` paths,
    without bytecode caches."""
    if root.is_file():
        return {f"{under}/{root.name}": root.read_bytes()}
    return {f"{under}/{root.name}/{path.relative_to(root).as_posix()}": path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}


def source_commit(root: Path = PROJECT_ROOT) -> dict:
    """The checkout's commit and whether its tree differs from it (None outside git)."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "checkout": str(root),
                "note": "not a git checkout: the digests below are the only record"}
    status = git("status", "--porcelain", "--", PROGRAM)
    return {"commit": commit.strip(), "dirty": bool((git("status", "--porcelain") or "").strip()),
            "program_dirty": bool((status or "").strip()), "checkout": str(root)}


def _find_module(name: str) -> ModuleSpec | None:
    """Where ``name`` (top-level) imports from for a trial (the working directory, then
    PYTHONPATH and the interpreter's path), without importing it."""
    return PathFinder.find_spec(name, [os.getcwd(), *sys.path])


def _installed(origin: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in origin.parts)


def workload_files(entry: str) -> tuple[dict[str, bytes], dict]:
    """The user's workload module or package as job files, and its provenance;
    ConfigError (one line) when it cannot be reached or is too large to carry."""
    module = entry.partition(":")[0]
    top = module.split(".")[0]
    where = {"entry": entry, "module": top}
    if top == PROGRAM:  # a preset of the trial program (trials.image_cnn): carried with it
        path = PROJECT_ROOT.joinpath(*module.split(".")).with_suffix(".py")
        files = _tree(path, f"{SRC}/{PROGRAM}") if path.is_file() else {}
        return {}, {**where, "carried": f"{SRC}/{PROGRAM}/ (the trial program)",
                    "sha256": digest(files) if files else None}
    spec = _find_module(top)
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        raise ConfigError(
            f"workload.entry={entry}: module {top!r} is not importable from here (working "
            f"directory {os.getcwd()}, PYTHONPATH), so the export cannot carry it: run the "
            "export from the directory that holds it, or add that directory to PYTHONPATH")
    locations = list(spec.submodule_search_locations or [])
    root = Path(locations[0]) if locations else Path(str(spec.origin))
    if _installed(root):
        return {}, {**where, "carried": None, "installed_at": str(root),
                    "note": "an installed package: the job's environment must provide it"}
    files = _tree(root, SRC)
    size = sum(len(data) for data in files.values())
    if size > MAX_CARRIED_BYTES:
        raise ConfigError(
            f"workload.entry={entry}: {root} holds {size / 2**20:.0f} MiB, too much to copy "
            f"into the job (limit {MAX_CARRIED_BYTES // 2**20} MiB): make it an installable "
            "package and install it into the job's environment")
    return files, {**where, "carried": f"{SRC}/{root.name}", "from": str(root),
                   "files": len(files), "sha256": digest(files)}


def workload_config_file(job: TrialConfig) -> tuple[dict[str, bytes], str | None]:
    """A MindFormers workload's YAML (``workload.options.config``, pinned to an absolute
    path when the config was composed) as a job file ``src/<name>``; ({}, None) for any
    other workload. The job runs from its own directory, where that relative path
    resolves (trials.contract.mindformers.pin_workload_config)."""
    path = job.workload.options.get(OPTION_CONFIG) if job.workload.entry == ADAPTER_ENTRY \
        else None
    if not isinstance(path, str) or not path:
        return {}, None
    source = Path(path).expanduser()
    if not source.is_file():
        raise ConfigError(f"workload.options.{OPTION_CONFIG}={path} is not a file: the export "
                          "cannot carry the MindFormers config the model is built from")
    inside = f"{SRC}/{source.name}"
    return {inside: source.read_bytes()}, inside


def carry(job: TrialConfig) -> Carried:
    """The trial program and the job's workload module as job files, with provenance."""
    program = _tree(PROJECT_ROOT / PROGRAM, SRC)
    carried = Carried(files=dict(program), modules=[])
    source = {**source_commit(), "program": {"path": f"{SRC}/{PROGRAM}",
                                             "files": len(program),
                                             "sha256": digest(program)}}
    if job.workload.entry:
        files, where = workload_files(job.workload.entry)
        carried.files.update(files)
        source["workload"] = where
        if where["module"] != PROGRAM:
            carried.modules.append(where["module"])
    config, carried.workload_config = workload_config_file(job)
    if config:
        carried.files.update(config)
        source["workload_config"] = {"carried": carried.workload_config,
                                     "from": job.workload.options.get(OPTION_CONFIG),
                                     "sha256": digest(config)}
    carried.provenance = source
    return carried
