"""The sweep's file: records written in place, each byte once; damage to them is recomputed, never published."""
from __future__ import annotations

import datetime
import re
import subprocess
import sys
import time
import types

import numpy as np
import pytest
import xarray as xr

from sensitivity.errors import DataError
from sensitivity.store.record_file import RecordLayout
from sensitivity.store.records import RecordStore
from tests.helpers import CLI, ROOT
from tests.helpers.functions import ishigami_jacobian
from workflows import sweep

SMALL = ["grid.n=96", "jacobian=float64", "jacobian.chunk_size=16", "points_per_part=32", "plots=false"]


def values(path) -> xr.Dataset:
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def interrupted(config, monkeypatch, after: int = 32) -> list[int]:
    """Run the sweep of ``config`` until the part starting at ``after`` is committed, then stop it (Ctrl-C); return
    the first samples of the parts this run committed."""
    commit, committed = RecordStore.commit, []

    def crash(self, start, stop):
        commit(self, start, stop)
        committed.append(start)
        if start >= after:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(RecordStore, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(config)
    monkeypatch.undo()
    return committed


@pytest.mark.parametrize("same_second", [False, True])
def test_flipped_bytes_in_the_records_are_recomputed(compose_config, tmp_path, monkeypatch, caplog, same_second):
    """``same_second``: the resumed run's header equals the interrupted one's (both stamped in one second), so the
    file is not hashed again at the end and the published checksum is the running hash itself (it had taken in
    the damaged block's bytes before they were found damaged: CI's failure)."""
    out = tmp_path / "run"
    interrupted(compose_config("sweep", SMALL, output_dir=out), monkeypatch)
    records = out / "sweep.nc.parts" / "records.nc"
    raw = bytearray(records.read_bytes())
    layout = RecordLayout.read(bytes(raw))[0]
    raw[layout.offset(40)] ^= 0x10  # in the second block, [32, 64)
    records.write_bytes(bytes(raw))
    if same_second:  # the resumed run stamped with the interrupted run's second
        stamp = datetime.datetime.strptime(re.search(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z: sensitivity", raw)[1].decode(),
                                           "%Y-%m-%dT%H:%M:%S")
        clock = type("Clock", (datetime.datetime,), {"now": classmethod(lambda cls, tz=None: stamp.replace(tzinfo=tz))})
        monkeypatch.setattr(sys.modules["sensitivity.datasets.provenance"], "_dt",
                            types.SimpleNamespace(datetime=clock, timezone=datetime.timezone))
    resumed = sweep.run(compose_config("sweep", SMALL, output_dir=out))
    assert "records [32, 64) do not match their receipt" in caplog.text
    clean = sweep.run(compose_config("sweep", SMALL, output_dir=tmp_path / "clean"))
    xr.testing.assert_identical(values(resumed), values(clean))
    got = values(resumed)
    np.testing.assert_allclose(got["jacobian"].values, ishigami_jacobian(got["x"].values), rtol=1e-12)
    assert subprocess.run(["sha256sum", "-c", "--quiet", "sweep.nc.sha256"], cwd=out).returncode == 0
    assert resumed.stat().st_size == layout.offset(96)  # header, labels and the records: nothing else


def test_a_pipeline_stage_replaces_the_unfinished_sweep_of_other_settings(compose_config, tmp_path, monkeypatch):
    """An interrupted sweep leaves parts. Rerun with its settings, a stage of `sensitivity run`
    (``replace_other_settings=true``) resumes them; rerun with another grid, a plain run refuses them in one line
    and a stage removes them and computes the new grid whole (checked against the closed form)."""
    out, stage = tmp_path / "run", [*SMALL, "replace_other_settings=true"]
    assert interrupted(compose_config("sweep", stage, output_dir=out), monkeypatch, after=0) == [0]
    assert interrupted(compose_config("sweep", stage, output_dir=out), monkeypatch, after=32) == [32]  # resumed
    assert (out / "unfinished.fingerprint").is_file()  # the owner of the parts left
    other = [*stage[1:], "grid.n=64"]
    with pytest.raises(DataError, match="holds unfinished work of a different computation"):
        sweep.run(compose_config("sweep", other[:-2] + other[-1:], output_dir=out))
    published = sweep.run(compose_config("sweep", other, output_dir=out))
    got = values(published)
    assert got.sizes["sample"] == 64
    np.testing.assert_allclose(got["jacobian"].values, ishigami_jacobian(got["x"].values), rtol=1e-12)
    assert subprocess.run(["sha256sum", "-c", "--quiet", "sweep.nc.sha256"], cwd=out).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "sweep.nc", "sweep.nc.sha256"]


@pytest.mark.slow
def test_a_second_concurrent_run_is_refused_while_the_first_writes(tmp_path):
    """The sweep's lock, end to end: a second run of the same sweep is refused naming the first, which completes.

    (tests/workflows/test_sweep_store.py has the same check on 2^18 points, which the record store now
    sweeps in ~6 s, less than the second run takes to reach the lock; 2048 parts keep this first run busy.)"""
    args = ["sweep", "grid.n=1048576", "jacobian.chunk_size=512", "points_per_part=512", "plots=false",
            "progress=false", f"hydra.run.dir={tmp_path / 'run'}"]
    first = subprocess.Popen(CLI + args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    parts = tmp_path / "run" / "sweep.nc.parts"
    while not list(parts.glob("part-*.nc")) and first.poll() is None:
        time.sleep(0.05)
    second = subprocess.run(CLI + args, cwd=ROOT, capture_output=True, text=True)
    assert first.poll() is None, "the first run ended before the second reached the lock: make the grid larger"
    assert second.returncode == 2, second.stderr[-2000:]
    message = [line for line in (second.stdout + second.stderr).splitlines() if "being written by another run" in line]
    assert len(message) == 1 and f"pid {first.pid}" in message[0]
    assert first.wait() == 0, first.stderr.read()[-2000:]
    assert subprocess.run(["sha256sum", "-c", "--quiet", "sweep.nc.sha256"], cwd=tmp_path / "run").returncode == 0


def test_a_run_that_fails_before_any_work_leaves_its_directory_empty(compose_config, tmp_path, monkeypatch):
    """A run that fails inside its run directory before any block is written leaves no file behind (nor the
    owner record of work it never started)."""
    out = tmp_path / "run"

    def fails(*args, **kwargs):
        raise RuntimeError("the model could not be loaded")

    monkeypatch.setattr(sweep, "_sweep", fails)
    with pytest.raises(RuntimeError, match="could not be loaded"):
        sweep.run(compose_config("sweep", SMALL, output_dir=out))
    assert list(out.iterdir()) == []
