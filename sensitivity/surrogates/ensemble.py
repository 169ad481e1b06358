"""An ensemble of surrogates as one artifact: a directory of ``.keras`` members and a JSON manifest with their hashes.

Layout (``<name>.ensemble/``)::

    ensemble.json        {"format": "sensitivity-ensemble", "version": 1,
                          "members": [{"file": "member_0.keras", "sha256": "...", "seed": 0,
                                       "bootstrap": true}, ...], ...}
    member_0.keras
    member_1.keras
    ...

:func:`write_ensemble` builds the directory in a temporary sibling and renames it into place
(:func:`sensitivity.datasets.write_directory_atomic`), so a reader never sees half an ensemble;
:func:`read_manifest` refuses a member whose bytes differ from the hash recorded for it (a replaced,
truncated or retrained file), and gives the ensemble ONE content hash: the SHA-256 of the manifest, which
holds every member's. :func:`sensitivity.surrogates.load.load_surrogate` loads such a directory wherever it
loads one model.

Ensembles of networks trained from different seeds on bootstrap resamples of the training set estimate the
surrogate's own (epistemic) uncertainty from the spread of their members (Lakshminarayanan, Pritzel &
Blundell 2017, arXiv:1612.01474).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sensitivity.errors import ModelError

#: The manifest's file name inside an ensemble directory (what marks a directory as an ensemble).
MANIFEST = "ensemble.json"
FORMAT, VERSION = "sensitivity-ensemble", 1
#: The entry of a member's ``.keras`` archive that records the training run it comes from.
STAMP = "sensitivity_member.json"


@dataclass(frozen=True)
class Manifest:
    """An ensemble directory, read and verified.

    Attributes
    ----------
    path
        The directory.
    members
        The member files in order, each verified against its recorded hash.
    records
        The manifest's record of each member (file, sha256, seed, bootstrap, ...).
    content_hash
        ``sha256:<hex>`` of the manifest file: one hash for the whole ensemble.
    info
        The manifest's other entries (how the ensemble was trained).
    """

    path: Path
    members: tuple[Path, ...]
    records: tuple[dict[str, Any], ...]
    content_hash: str
    info: dict[str, Any]

    @property
    def size(self) -> int:
        """Number of members ``K``."""
        return len(self.members)


def is_ensemble(path: str | Path) -> bool:
    """Is ``path`` an ensemble directory (holds :data:`MANIFEST`)?"""
    return Path(path).is_dir() and (Path(path) / MANIFEST).is_file()


def member_file(k: int) -> str:
    """The file name of member ``k``."""
    return f"member_{k}.keras"


def write_ensemble(path: str | Path, save_member: Callable[[int, Path], Any], records: Sequence[Mapping[str, Any]],
                   info: Mapping[str, Any] | None = None, *, training_run: str | None = None) -> Path:
    """Write an ensemble directory atomically: ``save_member(k, file)`` writes member ``k``, then the manifest.

    Every member is one training of one run: the run's id is recorded in the manifest (``training_run``, and in
    each member's record) and stamped into each member's ``.keras`` archive (:data:`STAMP`), so that
    :func:`read_manifest` refuses a member swapped in from another training even when its hash was updated.

    Parameters
    ----------
    path
        The directory to write (replaced as a whole once complete).
    save_member
        Writes member ``k`` to the ``.keras`` file it is given.
    records
        One mapping per member (e.g. its seed and whether it was trained on a bootstrap resample); the file
        name and its hash are added.
    info
        Other manifest entries (JSON-serialisable).
    training_run
        The id of the training these members come from (e.g. a hash of its data and settings, so a retraining of
        the same run has the same one); None: a fresh random id.
    """
    import uuid
    import zipfile

    from sensitivity.datasets import content_hash, write_directory_atomic

    if not records:
        raise ModelError("an ensemble needs at least one member, got none")
    run = training_run or uuid.uuid4().hex

    def fill(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        entries = []
        for k, record in enumerate(records):
            file = tmp / member_file(k)
            save_member(k, file)
            if zipfile.is_zipfile(file):  # a .keras archive: Keras reads its own entries and ignores this one
                with zipfile.ZipFile(file, "a") as archive:
                    archive.writestr(STAMP, json.dumps({"training_run": run, "member": k}))
            entries.append({**dict(record), "file": member_file(k), "sha256": content_hash(file),
                            "training_run": run})
        manifest = {"format": FORMAT, "version": VERSION, **dict(info or {}), "training_run": run, "members": entries}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")

    return write_directory_atomic(path, fill)


def read_manifest(path: str | Path) -> Manifest:
    """Read and verify the ensemble directory ``path``.

    Raises
    ------
    ModelError
        No manifest, an unknown format, a member file missing, or a member whose SHA-256 differs from the
        manifest's (named, with both hashes); members that are not distinct trainings of one run
        (:func:`_check_distinct`).
    """
    from sensitivity.datasets import content_hash

    path = Path(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise ModelError(f"surrogate ensemble {path}: no {MANIFEST} manifest")
    raw = manifest_path.read_bytes()
    try:
        manifest = json.loads(raw)
    except ValueError as err:
        raise ModelError(f"surrogate ensemble {path}: {MANIFEST} is not valid JSON: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ModelError(f"surrogate ensemble {path}: {MANIFEST} is not a {FORMAT} v{VERSION} manifest")
    records = manifest.get("members")
    if not isinstance(records, list) or not records:
        raise ModelError(f"surrogate ensemble {path}: {MANIFEST} lists no members")
    members = []
    for k, record in enumerate(records):
        file = path / str(record.get("file", ""))
        if not file.is_file() or file.parent != path:
            raise ModelError(f"surrogate ensemble {path}: member {k} file {record.get('file')!r} not found")
        actual = content_hash(file)
        if actual != record.get("sha256"):
            raise ModelError(f"surrogate ensemble {path}: member {k} ({file.name}) has {actual[:23]}..., the "
                             f"manifest records {str(record.get('sha256'))[:23]}...: the file was changed; retrain "
                             "or restore it")
        members.append(file)
    _check_distinct(path, records, manifest.get("training_run"), members)
    info = {k: v for k, v in manifest.items() if k not in ("format", "version", "members")}
    return Manifest(path, tuple(members), tuple(records), "sha256:" + hashlib.sha256(raw).hexdigest(), info)



def _check_distinct(path: Path, records: Sequence[Mapping[str, Any]], run: Any, members: Sequence[Path]) -> None:
    """Refuse an ensemble whose members are not distinct trainings of one recorded run: two members with the same
    bytes (one file listed twice, or a copy: their spread would be zero), or a member whose training run (stamped
    in its archive or recorded for it in the manifest) is not the manifest's (else the first one found). An
    ensemble written before runs were recorded (no stamp, no record) is checked for duplicates only."""
    seen: dict[str, int] = {}
    for k, record in enumerate(records):
        first = seen.setdefault(str(record.get("sha256")), k)
        if first != k:
            raise ModelError(f"surrogate ensemble {path}: members {first} and {k} are the same file "
                             f"({str(record.get('sha256'))[:23]}...); an ensemble's spread needs distinct trainings")
    stamps = [_stamped_run(file) for file in members]
    expected = run or next((r for r in [*stamps, *(rec.get("training_run") for rec in records)] if r), None)
    for k, (stamped, record) in enumerate(zip(stamps, records)):
        other = {stamped, record.get("training_run")} - {None, expected}
        if expected and other:
            raise ModelError(f"surrogate ensemble {path}: member {k} ({members[k].name}) comes from training run "
                             f"{str(other.pop())[:12]}..., the ensemble from {str(expected)[:12]}...: members must "
                             "be trainings of one run; retrain the ensemble")


def _stamped_run(file: Path) -> str | None:
    """The training run stamped into a member's ``.keras`` archive (:data:`STAMP`), or None."""
    import zipfile

    if not zipfile.is_zipfile(file):
        return None
    with zipfile.ZipFile(file) as archive:
        if STAMP not in archive.namelist():
            return None
        return json.loads(archive.read(STAMP)).get("training_run")
