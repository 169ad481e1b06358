"""Atomic writes: a temporary sibling renamed into place, with a SHA-256 record beside a result.

A failed write (full disk, read-only directory) is a one-line :class:`~sensitivity.errors.DataError`
and leaves the previous file, or none, never a partial one.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from sensitivity.datasets.provenance import content_hash
from sensitivity.errors import DataError, disk_error
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


ENCODING_ENGINE = "netcdf4"


def write_atomic(ds: xr.Dataset, path: str | Path, *, before_rename: Callable[[Path], Any] | None = None) -> Path:
    """Write ``ds`` to netCDF at ``path`` through a temporary file renamed into place.

    ``before_rename(tmp)`` runs on the finished temporary file before the rename (e.g.
    :func:`record_checksum`). A failed write (full disk, read-only directory) raises a one-line
    :class:`~sensitivity.errors.DataError` and leaves ``path`` as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ds.to_netcdf(tmp, engine=ENCODING_ENGINE, encoding=_encoding(ds))
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise disk_error(path, e) from None
    except RuntimeError:  # netCDF-C reports a full disk as "NetCDF: HDF error"
        tmp.unlink(missing_ok=True)
        if shutil.disk_usage(path.parent).free < 2**24:
            raise disk_error(path, OSError(errno.ENOSPC, "no space left on device")) from None
        raise
    return path


def record_checksum(path: str | Path, tmp: str | Path | None = None) -> Path:
    """Record the SHA-256 of ``tmp`` (default ``path``) as ``<path>.sha256`` (``sha256sum -c`` format)."""
    digest = content_hash(tmp or path).removeprefix("sha256:")
    return write_text_atomic(f"{digest}  {Path(path).name}\n", checksum_path(path))


def checksum_path(path: str | Path) -> Path:
    """Where :func:`write_atomic` records the checksum of ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def recorded_checksum(path: str | Path) -> str | None:
    """The checksum recorded beside ``path`` (``<path>.sha256``) as ``sha256:<hex>``; None when none was recorded."""
    record = checksum_path(path)
    if not record.is_file():
        return None
    words = record.read_text().split()
    return f"sha256:{words[0]}" if words else None


def verify_checksum(path: str | Path, sha256: str | None = None) -> bool | None:
    """Whether ``path`` matches its recorded checksum; None when none was recorded.

    ``sha256`` is the file's :func:`content_hash` when the caller has it already.
    """
    recorded = recorded_checksum(path)
    if recorded is None:
        return None
    return recorded == (sha256 or content_hash(path))


def _encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Object (string) variables as variable-length strings, and :func:`coordinate_encoding`; everything else as
    is."""
    encoding: dict[str, dict[str, Any]] = {name: {"dtype": str} for name, var in ds.variables.items()
                                           if var.dtype == object}
    encoding.update(coordinate_encoding(ds))
    return encoding


def coordinate_encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """No fill value on a float dimension coordinate (CF 2.5.1: coordinate variables must have no missing values;
    xarray gives every float variable a ``_FillValue`` by default), for every netCDF writer of a result."""
    return {name: {"_FillValue": None} for name in ds.dims if name in ds.coords
            and ds[name].dtype.kind == "f" and "_FillValue" not in ds[name].encoding}


def write_bytes_atomic(data: bytes, path: str | Path, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` through a temporary file renamed into place (binary interop files).

    ``durable=False`` skips the ``fsync`` before the rename: a killed process loses nothing (the kernel keeps its
    writes), only a machine's crash may leave the file empty or torn, which a reader that verifies it must expect.
    """
    return _replace_atomic(path, lambda tmp: tmp.write_bytes(data), durable=durable)


def copy_atomic(source: str | Path, path: str | Path) -> Path:
    """Copy the file ``source`` to ``path`` through a temporary file renamed into place (an exported model).

    A failed copy (full disk, read-only directory) raises a one-line :class:`~sensitivity.errors.DataError` and leaves
    ``path`` as it was: the old file or none, never a partial copy.
    """
    return _replace_atomic(path, lambda tmp: shutil.copyfile(source, tmp))


def _replace_atomic(path: str | Path, fill: Callable[[Path], Any], *, durable: bool = True) -> Path:
    """``fill(tmp)`` writes the temporary sibling ``.<name>.tmp``, which is synced to disk (``durable``) and renamed
    onto ``path``; on any failure the temporary file is removed, and an OSError becomes :func:`disk_error`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fill(tmp)
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise disk_error(path, e) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(text: str, path: str | Path) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (JSON, PEST uncertainty files)."""
    return write_bytes_atomic(text.encode("utf-8"), path)


def write_directory_atomic(path: str | Path, fill: Callable[[Path], Any]) -> Path:
    """Build a directory artifact (e.g. a TF SavedModel) in a temporary sibling, then rename it into place.

    ``fill(tmp_dir)`` writes the content; if it raises, the temporary directory is removed and
    ``path`` is left as it was. An existing ``path`` is replaced only once the new content is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    old = path.with_name(f".{path.name}.old")
    for stale in (tmp, old):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        fill(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
    return path


def check_disk_space(path: str | Path, nbytes: float, what: str) -> None:
    """Refuse up front, in one line with the estimate, a result of ``nbytes`` that the disk holding ``path``
    cannot take (free space below the estimate)."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    if nbytes > free:
        raise DataError(f"{what} needs about {nbytes / 2**30:.3g} GiB on disk, {where} has {free / 2**30:.3g} GiB "
                        "free; fewer points, shards on several disks, or another output directory")
