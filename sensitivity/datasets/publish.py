"""A run directory's result set, published whole: locked, fingerprinted, staged, recorded in a manifest.

Every workflow that writes follows the sweep store's protocol through :class:`ResultSet`:

1. **one run at a time**: an exclusive kernel lock on ``<run dir>/results.lock`` (a second run into the
   same directory is refused in one line naming the holder; ``kill -9`` drops the lock);
2. **one computation per directory**: the manifest records the fingerprint of everything that changes the
   result; a rerun with other settings is refused in one line, a rerun with the same settings finds the
   complete set and does no work;
3. **published whole**: the files are written under their own names into a hidden staging directory
   unique to this run, then moved into the run directory, the manifest (``manifest.json``: workflow,
   fingerprint, inputs and the SHA-256 of every file) written last and atomically. The old manifest is
   removed before the first file moves, so at every moment the directory holds either a complete set
   that its manifest describes, or no manifest: a set that looks complete is never a mix of two runs.

Readers of a result (:func:`verified`) accept it only when its manifest (or, for a sweep or a merged
sweep, its own ``<file>.sha256`` record) matches its bytes.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from sensitivity.datasets.provenance import content_hash
from sensitivity.datasets.run_lock import RunLock
from sensitivity.datasets.write import verify_checksum, write_text_atomic
from sensitivity.errors import DataError, disk_error

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
LOCK = "results.lock"
#: The fingerprint of the computation whose unfinished, resumable work (``*.parts``) the directory holds.
UNFINISHED = "unfinished.fingerprint"


class OtherSettings(DataError):
    """The run directory holds a result computed with other settings."""


class Unverified(DataError):
    """A result without a checksum record, or one whose bytes no longer match it."""


def read_manifest(directory: str | Path) -> dict[str, Any] | None:
    """The manifest of ``directory``, or None when there is none (or it cannot be read as one)."""
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    return manifest


def _files(root: Path) -> Iterable[Path]:
    """Every regular file under ``root`` (a file, or a directory artifact such as a SavedModel)."""
    if root.is_file():
        yield root
    elif root.is_dir():
        yield from sorted(p for p in root.rglob("*") if p.is_file())


@dataclass
class ResultSet:
    """The result set of one run of ``workflow`` in ``directory`` (a context manager holding the run's lock).

    Parameters
    ----------
    directory
        The run directory.
    workflow
        The workflow that computes the set (named in the manifest and in refusals).
    fingerprint
        Identity of everything that changes the result (settings, input files' hashes, the surrogate's hash,
        the package version): a directory holds the results of one fingerprint.
    inputs
        The input files and their content hashes, recorded in the manifest.
    replace
        A result of other settings in ``directory`` is replaced (its manifest removed first) instead of refused:
        for a directory a pipeline owns (a stage of ``sensitivity run``), where a changed setting recomputes.
        The unfinished work of an interrupted run of other settings (``*.parts``) is removed too.
    recompute
        Discard the directory's set and any unfinished work even when they are this computation's, and compute it
        again (``force``).

    Attributes
    ----------
    complete
        True when the directory already holds this computation's complete, intact set (nothing to do).
    """

    directory: Path
    workflow: str
    fingerprint: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    replace: bool = False
    recompute: bool = False
    complete: bool = False
    _staging: Path | None = None
    _adopted: dict[str, str] = field(default_factory=dict)
    _lock: Any = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)

    def __enter__(self) -> ResultSet:

        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise disk_error(self.directory, err) from None
        self._lock = RunLock(self.directory / LOCK)
        self._lock.acquire()
        try:
            previous = read_manifest(self.directory)
            other = previous is not None and previous.get("fingerprint") != self.fingerprint
            if previous is not None and (self.recompute or (other and self.replace)):
                self._discard(previous)
                previous, other = None, False
            if other:
                raise OtherSettings(
                    f"{self.directory} holds a {previous.get('workflow', '?')} result of other settings; write into "
                    "another run directory (a changed override names a new one) or remove this one")
            self.complete = previous is not None and self._intact(previous)
            if not self.complete:
                self._claim_unfinished()
            for stale in self.directory.glob(".staging-*"):  # an interrupted run's: nobody else holds the lock
                shutil.rmtree(stale, ignore_errors=True)
            self._staging = self.directory / f".staging-{uuid.uuid4().hex[:12]}"
            self._staging.mkdir()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        if not any(self.directory.glob("*.parts")):  # no unfinished work left to own
            (self.directory / UNFINISHED).unlink(missing_ok=True)
        self._lock.release()

    def _discard(self, manifest: Mapping[str, Any]) -> None:
        """Remove the directory's result set: its manifest first (no longer a result), then its files and any
        unfinished resumable work (``*.parts``)."""
        (self.directory / MANIFEST).unlink()
        tops = {Path(name).parts[0] for name in manifest["files"]}
        for entry in [*(self.directory / top for top in tops), *self.directory.glob("*.parts")]:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            Path(f"{entry}.sha256").unlink(missing_ok=True)

    def _claim_unfinished(self) -> None:
        """Remove the directory's unfinished work (``*.parts``, which the sweep store resumes, and refuses when it is
        another computation's) when this run recomputes (``recompute``), or replaces results of other settings
        (``replace``) and the work is not this computation's; where none is left, record this run as the owner of
        the work it starts."""
        marker = self.directory / UNFINISHED
        owner = marker.read_text().strip() if marker.is_file() else None
        parts = sorted(self.directory.glob("*.parts"))
        if parts and (self.recompute or (self.replace and owner != self.fingerprint)):
            log.info("%s: removing the unfinished work of %s (%s)", self.directory,
                     "an earlier run" if self.recompute else "a run of other settings", ", ".join(p.name for p in parts))
            for entry in parts:
                shutil.rmtree(entry, ignore_errors=True)
            parts = []
        if not parts:
            write_text_atomic(self.fingerprint + "\n", marker)

    def _intact(self, manifest: Mapping[str, Any]) -> bool:
        return all((self.directory / name).is_file() and content_hash(self.directory / name) == digest
                   for name, digest in manifest["files"].items())

    def path(self, name: str) -> Path:
        """Where ``name`` is once published (read the previous complete set from here)."""
        return self.directory / name

    @property
    def staging(self) -> Path:
        """The directory this run writes its files into, under their final names."""
        if self._staging is None:
            raise RuntimeError("ResultSet used outside its `with` block")
        return self._staging

    def adopt(self, name: str, digest: str | None = None) -> None:
        """Take ``name``, already in place in the run directory (a sweep store's verified file), into the set."""
        self._adopted[name] = digest or content_hash(self.directory / name)

    def publish(self) -> Path:
        """Move the staged files into the run directory and record the set; returns the manifest's path.

        The previous manifest goes first, the new one last: an interruption in between leaves no manifest,
        which every reader takes as no result (a rerun publishes the set again).
        """
        staged = sorted(self.staging.iterdir())
        digests = {str(p.relative_to(self.staging)): content_hash(p) for entry in staged for p in _files(entry)}
        manifest = self.directory / MANIFEST
        try:
            manifest.unlink(missing_ok=True)
            for entry in staged:
                target = self.directory / entry.name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                os.replace(entry, target)
            _fsync_directory(self.directory)
        except OSError as err:
            raise disk_error(self.directory, err) from None
        record = {"workflow": self.workflow, "fingerprint": self.fingerprint, "inputs": dict(self.inputs),
                  "files": {**self._adopted, **digests}}
        published = write_text_atomic(json.dumps(record, indent=1, sort_keys=True) + "\n", manifest)
        (self.directory / UNFINISHED).unlink(missing_ok=True)
        return published


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verified(path: str | Path, *, allow_unverified: bool = False, flag: str = "") -> Path:
    """``path`` after checking that its bytes match their record: the manifest of its run directory, or its own
    ``<file>.sha256`` (a sweep, a merged sweep).

    Parameters
    ----------
    allow_unverified
        Accept a result without any record (with the caller's explicit flag); a record that does not match
        is refused all the same.
    flag
        The config key that sets ``allow_unverified``, named in the refusal.

    Raises
    ------
    Unverified
        No record (unless allowed), or bytes that do not match it; the message says how to re-create one.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"result not found: {path}")
    manifest = read_manifest(path.parent)
    relative = path.name
    if manifest is not None and relative in manifest["files"]:
        if content_hash(path) != manifest["files"][relative]:
            raise Unverified(f"{path} does not match its run's manifest ({path.parent / MANIFEST}): changed after it "
                             "was written; recompute it (rerun the workflow that wrote it into a new run directory)")
        return path
    own = verify_checksum(path) if path.is_file() else None
    if own is True:
        return path
    if own is False:
        raise Unverified(f"{path} does not match its checksum record {path.name}.sha256: changed after it was "
                         "written; recompute it")
    if allow_unverified:
        return path
    hint = f", or accept it as it is with {flag}=true" if flag else ""
    raise Unverified(f"{path} has no checksum record (no {MANIFEST} in its run directory listing it, no "
                     f"{path.name}.sha256): rerun the workflow that wrote it to publish a verified result{hint}")
