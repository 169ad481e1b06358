"""The sweep's file: records written in place, each byte once; damage to them is recomputed, never published."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import xarray as xr

from sensitivity.record_file import RecordLayout
from sensitivity.store import RecordStore
from tests.helpers.functions import ishigami_jacobian
from workflows import sweep

SMALL = ["grid.n=96", "jacobian=float64", "jacobian.chunk_size=16", "points_per_part=32", "plots=false"]


def values(path) -> xr.Dataset:
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def test_flipped_bytes_in_the_records_are_recomputed(compose_config, tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"
    write = RecordStore.write_records

    def crash_after_two(self, records, start, stop, totals):
        write(self, records, start, stop, totals)
        if start >= 32:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(RecordStore, "write_records", crash_after_two)
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
