"""The sweep's file: records written in place, each byte once; damage to them is recomputed, never published."""
from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest
import xarray as xr

from sensitivity.record_file import RecordLayout
from sensitivity.store import RecordStore
from tests.helpers import CLI, ROOT
from tests.helpers.functions import ishigami_jacobian
from workflows import sweep

SMALL = ["grid.n=96", "jacobian=float64", "jacobian.chunk_size=16", "points_per_part=32", "plots=false"]


def values(path) -> xr.Dataset:
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def test_flipped_bytes_in_the_records_are_recomputed(compose_config, tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"
    commit = RecordStore.commit

    def crash_after_two(self, start, stop):
        commit(self, start, stop)
        if start >= 32:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(RecordStore, "commit", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(compose_config("sweep", SMALL, output_dir=out))
    monkeypatch.undo()
    records = out / "sweep.nc.parts" / "records.nc"
    raw = bytearray(records.read_bytes())
    layout = RecordLayout.read(bytes(raw))[0]
    raw[layout.offset(40)] ^= 0x10  # in the second block, [32, 64)
    records.write_bytes(bytes(raw))
    resumed = sweep.run(compose_config("sweep", SMALL, output_dir=out))
    assert "records [32, 64) do not match their receipt" in caplog.text
    clean = sweep.run(compose_config("sweep", SMALL, output_dir=tmp_path / "clean"))
    xr.testing.assert_identical(values(resumed), values(clean))
    got = values(resumed)
    np.testing.assert_allclose(got["jacobian"].values, ishigami_jacobian(got["x"].values), rtol=1e-12)
    assert subprocess.run(["sha256sum", "-c", "--quiet", "sweep.nc.sha256"], cwd=out).returncode == 0
    assert resumed.stat().st_size == layout.offset(96)  # header, labels and the records: nothing else


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
