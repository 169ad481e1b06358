"""Finished units of a long computation kept in a run directory, so that a rerun after a kill redoes none of them.

A computation made of a few expensive, separable units (the members of an ensemble trained one after another, the
rounds of a refinement, a batch of simulator runs) keeps each finished unit in ``<directory>/<name>/`` through
:class:`Checkpoints`:

- **atomic**: the unit is written into a temporary sibling and renamed into place
  (:func:`~sensitivity.datasets.write_directory_atomic`); its record ``<name>.json`` (the fingerprint and the
  SHA-256 of every file) is removed before and written after, atomically, so a unit without a record is unfinished;
- **fingerprinted**: the caller's fingerprint covers everything that determines the unit (its inputs' hashes,
  settings, seed, index, package versions); a unit of another fingerprint is never reused;
- **verified**: a unit is reused only when every file's bytes match its record; a damaged, truncated or unrecorded
  unit is computed again (and replaced), never reused.

A run directory names its unfinished work ``*.parts`` (:mod:`sensitivity.datasets.publish`): keep the checkpoints in
such a directory, so that ``recompute`` and a replacing run of other settings remove them, and remove it once the
result set is published.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

from sensitivity.datasets import content_hash, write_directory_atomic, write_text_atomic

log = logging.getLogger(__name__)


class Checkpoints:
    """The finished units of one computation, kept under ``directory``.

    Parameters
    ----------
    directory
        Where the units are kept (made when the first is saved); by convention ``<run dir>/<workflow>.parts``.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def load(self, name: str, fingerprint: str) -> Path | None:
        """The directory of the finished unit ``name`` when it was recorded with ``fingerprint`` and its bytes match
        the record; None otherwise (not there, unfinished, of another fingerprint, or damaged: compute it again)."""
        record, entry = self._record(name), self.directory / name
        if not record.is_file():
            return None
        try:
            recorded = json.loads(record.read_text())
            files, kept = recorded["files"], recorded["fingerprint"]
        except (OSError, ValueError, TypeError, KeyError):
            log.warning("%s: its record %s cannot be read; computed again", entry, record.name)
            return None
        if kept != fingerprint:
            log.info("%s: kept by a run of other inputs or settings; computed again", entry)
            return None
        if _digests(entry) != files:
            log.warning("%s: its files do not match their record %s (damaged); computed again", entry, record.name)
            return None
        return entry

    def save(self, name: str, fingerprint: str, write: Callable[[Path], Any]) -> Path:
        """Keep a finished unit: ``write(tmp)`` fills a fresh directory, renamed to ``<directory>/<name>``; the record
        comes last. Returns the unit's directory."""
        record, entry = self._record(name), self.directory / name
        record.unlink(missing_ok=True)  # from here until the new record, ``name`` is unfinished

        def fill(tmp: Path) -> None:
            tmp.mkdir(parents=True)
            write(tmp)

        write_directory_atomic(entry, fill)
        write_text_atomic(json.dumps({"fingerprint": fingerprint, "files": _digests(entry)}, indent=1, sort_keys=True)
                          + "\n", record)
        return entry

    def _record(self, name: str) -> Path:
        return self.directory / f"{name}.json"


def _digests(entry: Path) -> dict[str, str]:
    """``{relative path: SHA-256}`` of every regular file under ``entry`` (empty when there is none)."""
    if not entry.is_dir():
        return {}
    return {str(p.relative_to(entry)): content_hash(p) for p in sorted(entry.rglob("*")) if p.is_file()}


class DatasetCheckpoints:
    """Finished units that are one dataset each (``<name>/unit.nc``), all of one computation's ``fingerprint``:
    the ``load(name)`` / ``save(name, ds)`` a one-pass analysis keeps its groups' statistics through
    (:class:`sensitivity.analyses.indices.shards.Kept`)."""

    def __init__(self, directory: str | Path, fingerprint: str) -> None:
        self.units, self.fingerprint = Checkpoints(directory), fingerprint

    @property
    def directory(self) -> Path:
        return self.units.directory

    def load(self, name: str) -> Any:
        """The dataset of the finished unit ``name`` (read into memory), or None (compute it)."""
        from sensitivity.datasets import open_result

        entry = self.units.load(name, self.fingerprint)
        if entry is None:
            return None
        with open_result(entry / "unit.nc") as ds:
            return ds.load()

    def save(self, name: str, ds: Any) -> None:
        """Keep ``ds`` as the finished unit ``name``."""
        from sensitivity.datasets import write_atomic

        self.units.save(name, self.fingerprint, lambda tmp: write_atomic(ds, tmp / "unit.nc"))
