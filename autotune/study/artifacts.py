"""A study's files as Optuna artifacts, in a file-system store beside it: what
optuna-dashboard lists on a trial's page and on the study's.

    runs/<study>/artifacts/      an optuna.artifacts.FileSystemArtifactStore

- :func:`attach_run`: a launched trial's ``config.yaml``, the tail of its logs
  (``log_tail.txt``) and its ``metrics.jsonl``, uploaded where its result is recorded
  (:func:`autotune.study.scoring.tell`), before it is finished: Optuna takes a trial's
  artifacts only while it runs. Failed, pruned and stopped trials included.
- :func:`publish`: a file made after that (a trial's profile figure, the study's report),
  uploaded again only when its content changed, the older upload removed, so that
  publishing at every ``python -m autotune dashboard`` keeps one copy of each.

An upload that fails (a full disk, an unwritable store, a storage error) is one warning
line, never an exception that ends a sweep: the study's record of the trial matters more
than its copy of the files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.artifacts import FileSystemArtifactStore, upload_artifact
from optuna.artifacts.exceptions import ArtifactNotFound
from optuna.trial import FrozenTrial

from autotune.study.schema.published import Published, published, store_published
from trials.contract.trial_dir import TrialDir

log = logging.getLogger(__name__)

#: The name a trial's log tail is uploaded under.
LOG_TAIL_FILE = "log_tail.txt"
#: Lines of each log (stderr, then stdout) kept in the tail.
LOG_TAIL_LINES = 200
#: Optuna's key prefix for an artifact's meta (optuna/artifacts/_upload.py), and the one
#: optuna-dashboard also reads from the *study's* system attributes for a trial's artifacts
#: (optuna_dashboard/artifact/_backend.py, list_trial_artifacts): the one way to attach a
#: file to a trial that has finished, which Optuna's own upload refuses.
OPTUNA_PREFIX = "artifacts:"
DASHBOARD_TRIAL_PREFIX = "dashboard:artifacts:{trial_id}:"


def open_store(path: Path) -> FileSystemArtifactStore:
    """The artifact store in ``path`` (created)."""
    path.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(path)


@dataclass(frozen=True)
class RunFiles:
    """A launched trial's files to upload: its run directory, its metrics file (where
    ``run.metrics_path`` put it) and the store they go to."""

    store: Path
    run_dir: TrialDir
    metrics: Path


def attach_run(trial: optuna.Trial, files: RunFiles) -> list[str]:
    """Upload the trial's config, log tail and metrics (those that exist) to its
    artifacts; the names uploaded. Each failure is a warning, never raised."""
    uploaded = []
    try:
        store = open_store(files.store)
    except OSError as exc:
        log.warning("trial %d: no artifact store at %s (%s); its files stay in %s only",
                    trial.number, files.store, exc, files.run_dir.path)
        return uploaded
    with tempfile.TemporaryDirectory(prefix="autotune-artifacts-") as scratch:
        tail = Path(scratch) / LOG_TAIL_FILE
        tail.write_text(files.run_dir.log_tail(LOG_TAIL_LINES) or "(both logs are empty)\n")
        for path in (files.run_dir.config, tail, files.metrics):
            if not path.is_file():
                continue
            try:
                upload_artifact(study_or_trial=trial, file_path=str(path), artifact_store=store)
            except Exception as exc:  # noqa: BLE001 - failures are data: a warning line
                log.warning("trial %d: could not store %s as an artifact (%s: %s)",
                            trial.number, path.name, type(exc).__name__, exc)
                continue
            uploaded.append(path.name)
    return uploaded


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def publish(study: optuna.Study, store: FileSystemArtifactStore, path: Path, *,
            trial: FrozenTrial | None = None) -> bool:
    """Upload ``path`` as an artifact of the study, or of ``trial`` (finished or not),
    unless the same content is there already; an earlier upload of the same name with
    other content is removed. True when it uploaded; a failure is a warning (False)."""
    scope = "study" if trial is None else f"trial-{trial.number:04d}"
    key = f"{scope}/{path.name}"
    try:
        digest = sha256(path)
        earlier = published(study).get(key)
        if earlier is not None and earlier.sha256 == digest:
            return False
        prefix = (OPTUNA_PREFIX if trial is None
                  else DASHBOARD_TRIAL_PREFIX.format(trial_id=trial._trial_id))
        artifact_id = str(uuid.uuid4())
        with path.open("rb") as body:
            store.write(artifact_id, body)
        _set_meta(study, prefix + artifact_id, _meta(artifact_id, path))
        if earlier is not None and earlier.artifact_id:
            _remove(study, store, prefix + earlier.artifact_id, earlier.artifact_id)
        store_published(study, key, Published(sha256=digest, artifact_id=artifact_id))
        return True
    except Exception as exc:  # noqa: BLE001 - failures are data: a warning line
        log.warning("could not publish %s as an artifact of the %s (%s: %s)", path,
                    scope.replace("-", " "), type(exc).__name__, exc)
        return False


def _meta(artifact_id: str, path: Path) -> dict:
    """The meta Optuna writes for an upload (optuna.artifacts.ArtifactMeta's fields)."""
    mimetype, encoding = mimetypes.guess_type(path.name)
    return {"artifact_id": artifact_id, "filename": path.name,
            "mimetype": mimetype or "application/octet-stream", "encoding": encoding}


def _set_meta(study: optuna.Study, key: str, meta: dict | None) -> None:
    # Optuna has no public setter for a study's system attributes; its own upload and
    # optuna-dashboard's delete write them through the study's storage, as here.
    study._storage.set_study_system_attr(study._study_id, key, json.dumps(meta))


def _remove(study: optuna.Study, store: FileSystemArtifactStore, key: str,
            artifact_id: str) -> None:
    """What optuna-dashboard's delete does: the meta set to null, the file removed."""
    _set_meta(study, key, None)
    try:
        store.remove(artifact_id)
    except ArtifactNotFound:
        pass
