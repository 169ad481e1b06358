"""Atomic writes: a write that fails half-way (full disk, read-only run directory) leaves the target as it was,
no temporary file behind, and one line naming the path.

Tests run as root, where ``chmod`` does not block a write, so the failures are injected.
"""
from __future__ import annotations

import errno
import shutil

import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import write as datasets_write
from sensitivity.datasets import copy_atomic, write_atomic
from sensitivity.errors import DataError
from workflows import train


def assert_left_as_it_was(directory, target, before: bytes | None):
    assert (target.read_bytes() if target.exists() else None) == before
    assert sorted(p.name for p in directory.iterdir()) == ([] if before is None else [target.name])


@pytest.mark.parametrize("existing", [None, b"the previous result"])
def test_write_atomic_into_a_read_only_run_directory(tmp_path, monkeypatch, existing):
    target = tmp_path / "result.nc"
    if existing is not None:
        target.write_bytes(existing)

    def to_netcdf(self, path, **kwargs):  # what a read-only directory answers once the file is open
        with open(path, "wb") as f:
            f.write(b"CDF\x01partial")
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(xr.Dataset, "to_netcdf", to_netcdf)
    with pytest.raises(DataError) as caught:
        write_atomic(xr.Dataset({"a": ("x", np.arange(3.0))}), target)
    message = str(caught.value)
    assert "\n" not in message and str(target) in message and "permission denied" in message
    assert_left_as_it_was(tmp_path, target, existing)


@pytest.mark.parametrize("existing", [None, b"the previous model"])
def test_a_copy_that_fails_mid_way_leaves_no_partial_file(tmp_path, monkeypatch, existing):
    source = tmp_path / "source" / "surrogate.keras"
    source.parent.mkdir()
    source.write_bytes(b"model bytes " * 1000)
    export_dir = tmp_path / "export"
    export_dir.mkdir()
    target = export_dir / source.name
    if existing is not None:
        target.write_bytes(existing)

    def copyfile(src, dst, **kwargs):  # the disk fills after the first bytes
        with open(src, "rb") as f, open(dst, "wb") as g:
            g.write(f.read(100))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", copyfile)
    with pytest.raises(DataError, match=f"cannot write {target}: no space left on device"):
        train._export([source], export_dir)
    assert_left_as_it_was(export_dir, target, existing)
    monkeypatch.undo()
    copy_atomic(source, target)
    assert target.read_bytes() == source.read_bytes()
    assert sorted(p.name for p in export_dir.iterdir()) == [target.name]


def test_an_interrupted_write_removes_its_temporary_file(tmp_path):
    def interrupted(tmp):
        tmp.write_bytes(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        datasets_write._replace_atomic(tmp_path / "out.bin", interrupted)
    assert list(tmp_path.iterdir()) == []
