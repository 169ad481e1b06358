"""The record store: blocks written once in place into a netCDF classic file, hashed as written.

Oracles: the netCDF library (through xarray) reading the file back against the same dataset encoded by
the library itself, ``sha256sum`` on the published file, and a clean run for every fault.
"""
from __future__ import annotations

import hashlib
import subprocess

import numpy as np
import pytest
import xarray as xr

from sensitivity.store import record_file, records as store
from sensitivity.errors import DataError
from sensitivity.store.record_file import RecordLayout, encode
from sensitivity.store.records import RecordStore, run_records
from tests.helpers.blocks import BLOCKS, SPAN, block_dataset


def labeled(a: int, b: int) -> xr.Dataset:
    """Block ``[a, b)`` with the shapes of a sweep: y(sample, k), a field, labels, a non-record coordinate."""
    ds = block_dataset(a, b)
    sample = np.arange(a, b)
    return ds.assign(field=(("sample", "k", "p"), np.cos(sample[:, None, None] * np.arange(1, 4)[:, None]
                                                         + np.arange(2)).astype(np.float32), {"units": "m"}),
                     code=(("sample",), (sample % 7).astype(np.int8), {"units": "1"})).assign_coords(
        k=("k", np.arange(3, dtype=np.int32), {"units": "1"}),
        k_name=("k", np.array(["first", "second", "third"], dtype=object), {"long_name": "label"}))


def fill(a, b, records):
    ds = labeled(a, b)
    for name in records.dtype.names:
        records[name] = ds[name].values


SLICE = 3  # records per slice: parts of 8 go through in three


def starts(blocks) -> list[int]:
    """The first sample of every slice of ``blocks``."""
    return [a for start, stop in blocks for a in range(start, stop, SLICE)]


def run(path, fingerprint="fp", blocks=BLOCKS, fill=fill, check=lambda records: {"count": len(records)}, attrs=None):
    with RecordStore(path, fingerprint, SPAN, template=labeled(0, 0), attrs=attrs or {"title": "t"},
                     totals=("count",)) as rs:
        run_records(rs, blocks, fill, check, slice_size=SLICE)
        return rs.finalize()


def read(path) -> xr.Dataset:
    with xr.open_dataset(path) as ds:
        return ds.load()


def clean(tmp_path, attrs=None) -> xr.Dataset:
    """What the netCDF library itself writes for the whole span, read back."""
    ds = labeled(*SPAN).assign_attrs(attrs or {"title": "t"})
    ds.to_netcdf(tmp_path / "library.nc", format="NETCDF3_64BIT", unlimited_dims=["sample"])
    return read(tmp_path / "library.nc")


def assert_published(path, tmp_path, count=SPAN[1] - SPAN[0]):
    got = read(path)
    xr.testing.assert_identical(got.drop_attrs(deep=False), clean(tmp_path).drop_attrs(deep=False))
    assert got.attrs["title"] == "t" and got.attrs["count"] == count  # the totals: a rewritten header
    assert subprocess.run(["sha256sum", "-c", "--quiet", path.name + ".sha256"], cwd=path.parent).returncode == 0
    assert not path.with_name(path.name + ".parts").exists() and not path.with_name(path.name + ".lock").exists()


def test_the_layout_read_off_the_library_header_places_every_byte(tmp_path):
    """Header and fixed bytes from the library, records placed by the layout: the library reads it back
    as the dataset it would have written itself; padded records (an int8 variable) included."""
    header, fixed = encode(labeled(0, 0), "sample", {"title": "t", "count": 0})
    layout = RecordLayout.of(header, fixed)
    assert layout.padded and layout.header_space % 4096 == 0 and layout.header_space >= len(header.raw)
    records = np.zeros(SPAN[1] - SPAN[0], layout.record)
    fill(*SPAN, records)
    path = tmp_path / "r.nc"
    path.write_bytes(layout.header(header, len(records)) + fixed + records.tobytes())
    xr.testing.assert_identical(read(path).drop_attrs(deep=False), clean(tmp_path).drop_attrs(deep=False))
    assert RecordLayout.read(path.read_bytes()[: layout.records_at])[0] == layout
    np.testing.assert_array_equal(record_file.memory_map(path), records)
    longer, _ = encode(labeled(0, 0), "sample", {"title": "t" * (layout.header_space + 1)})
    with pytest.raises(DataError, match="outgrew its reserved"):
        layout.header(longer, 3)


def test_a_run_writes_each_byte_once_and_publishes_the_running_checksum(tmp_path):
    path = run(tmp_path / "r.nc")
    assert_published(path, tmp_path)
    records = path.stat().st_size - RecordLayout.read(path.read_bytes())[0].records_at
    assert records == (SPAN[1] - SPAN[0]) * RecordLayout.read(path.read_bytes())[0].record.itemsize


def test_without_direct_io_the_bytes_are_the_same(tmp_path, monkeypatch):
    direct = run(tmp_path / "direct.nc").read_bytes()
    monkeypatch.setattr(store, "_open_direct", lambda path: None)
    assert run(tmp_path / "cached.nc").read_bytes() == direct


def test_all_zero_totals_keep_the_header_and_its_running_hash(tmp_path):
    path = run(tmp_path / "r.nc", check=lambda records: {"count": 0})
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert path.with_name("r.nc.sha256").read_text() == f"{digest}  r.nc\n" and read(path).attrs["count"] == 0


def interrupted(path, after=2):
    """Killed at the first slice of part ``after``: ``after`` parts committed."""
    def dies(a, b, records):
        if a >= BLOCKS[after][0]:
            raise KeyboardInterrupt("killed")
        fill(a, b, records)

    with pytest.raises(KeyboardInterrupt):
        run(path, fill=dies)
    return sorted(path.with_name(path.name + ".parts").glob("part-*.nc"))


def test_resume_keeps_the_verified_blocks(tmp_path, caplog):
    path = tmp_path / "r.nc"
    assert len(interrupted(path)) == 2
    filled = []
    assert_published(run(path, fill=lambda a, b, r: (filled.append(a), fill(a, b, r))), tmp_path)
    assert filled == starts(BLOCKS[2:]) and "recomputed" not in caplog.text


@pytest.mark.parametrize("where", ["records", "header", "truncated", "deleted"])
def test_damaged_records_are_recomputed_from_the_first_bad_block(tmp_path, caplog, where):
    path = tmp_path / "r.nc"
    interrupted(path, after=3)
    data = path.with_name("r.nc.parts") / "records.nc"
    raw = bytearray(data.read_bytes())
    layout = RecordLayout.read(bytes(raw))[0]
    second = layout.offset(BLOCKS[1][0] - SPAN[0])
    if where == "records":  # a flipped byte in the second block
        raw[second + 5] ^= 0x01
        data.write_bytes(bytes(raw))
    elif where == "header":
        raw[20] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif where == "truncated":
        data.write_bytes(bytes(raw[: second + 3]))
    else:
        data.unlink()
    filled = []
    assert_published(run(path, fill=lambda a, b, r: (filled.append(a), fill(a, b, r))), tmp_path)
    assert filled == starts(BLOCKS[1:] if where in ("records", "truncated") else BLOCKS)
    assert "recomputed" in caplog.text


def test_a_changed_computation_is_refused(tmp_path):
    path = tmp_path / "r.nc"
    interrupted(path)
    with pytest.raises(DataError, match="different computation"):
        run(path, fingerprint="another")
    assert_published(run(path), tmp_path)


def test_runs_with_other_attributes_resume_each_other(tmp_path, caplog):
    """Every run has its own provenance: the header on disk stays until the end, so a run killed after a
    resume leaves receipts the next run still verifies."""
    path = tmp_path / "r.nc"
    interrupted(path, after=1)
    filled = []

    def dies_after_one(a, b, records):
        if a >= BLOCKS[2][0]:
            raise KeyboardInterrupt("killed")
        filled.append(a)
        fill(a, b, records)

    with pytest.raises(KeyboardInterrupt):
        run(path, fill=dies_after_one, attrs={"title": "t", "history": "second run, a longer header"})
    assert filled == starts(BLOCKS[1:2])
    filled.clear()
    assert_published(run(path, fill=lambda a, b, r: (filled.append(a), fill(a, b, r))), tmp_path)
    assert filled == starts(BLOCKS[2:]) and "recomputed" not in caplog.text


def test_blocks_out_of_order_are_refused(tmp_path):
    with RecordStore(tmp_path / "r.nc", "fp", SPAN, template=labeled(0, 0), attrs={}) as rs:
        first, second = rs.records(*BLOCKS[0]), rs.records(*BLOCKS[1])
        fill(*BLOCKS[1], second)
        with pytest.raises(DataError, match="not the next records' buffer"):
            rs.write_records(second, *BLOCKS[1], {})
        with pytest.raises(DataError, match=r"committed with records written up to 3"):
            rs.commit(*BLOCKS[0])
        fill(*BLOCKS[0], first)
        rs.write_records(first, *BLOCKS[0], {})
        rs.commit(*BLOCKS[0])
        with pytest.raises(DataError, match=r"cover \[3, 11\) of \[3, 40\)"):
            rs.finalize()


def test_a_stored_sweep_reads_record_blocks_as_xarray_does(tmp_path):
    from sensitivity.datasets import by_name, sweep_dataset
    from sensitivity.outputs.spec import OutputDim, OutputSpec
    from sensitivity.sweep.stored import StoredSweep

    rng = np.random.default_rng(0)
    spec = OutputSpec("y", "m", (OutputDim("time", (1.0, 2.0, 3.0), "days since 2020-01-01"),))
    points, values = rng.uniform(size=(40, 2)), rng.normal(size=(40, 3)).astype(np.float32)
    jacobian = rng.normal(size=(40, 3, 2)).astype(np.float32)
    values[3, 1] = np.nan

    def labels(a, b):
        return sweep_dataset(np.arange(a, b), points[a:b], values[a:b], jacobian[a:b], parameter_names=["a", "b"],
                             parameter_units=["s", "m"], parameter_long_names=None, output=spec)

    def put(a, b, records):
        for name in records.dtype.names:
            records[name] = labels(a, b)[name].values

    with RecordStore(tmp_path / "sweep.nc", "fp", (0, 40), template=labels(0, 0), attrs={"title": "s"}) as rs:
        run_records(rs, [(0, 16), (16, 32), (32, 40)], put, slice_size=5)
        path = rs.finalize()
    with StoredSweep(path) as sweep, xr.open_dataset(path, decode_times=False) as library:
        assert sweep._records is not None  # the mapped path is the one under test
        for blk in sweep.blocks(7):
            xr.testing.assert_identical(blk.data, by_name(library).isel(sample=slice(blk.start, blk.stop)).load())


def test_no_page_is_written_both_directly_and_through_the_page_cache(tmp_path, monkeypatch):
    """open(2): direct and cached writes to overlapping bytes are not coherent on every filesystem. Records of
    2,504 bytes in slices of three share a page with the slice before; the pages written directly and those
    written through the page cache never meet, and the library reads the file back as it writes it itself."""
    direct_fds, pages = set(), {"direct": set(), "cached": set()}
    open_direct, pwrite = store._open_direct, store._pwrite

    def opened(path):
        fd = open_direct(path)
        direct_fds.add(fd)
        return fd

    def written(fd, data, offset):
        end = offset + memoryview(data).cast("B").nbytes
        pages["direct" if fd in direct_fds else "cached"].update(range(offset // 4096, -(-end // 4096)))
        pwrite(fd, data, offset)

    monkeypatch.setattr(store, "_open_direct", opened)
    monkeypatch.setattr(store, "_pwrite", written)

    def wide(a: int, b: int) -> xr.Dataset:
        sample = np.arange(a, b)
        return xr.Dataset({"v": (("sample", "w"), np.sin(sample[:, None] * np.arange(1, 314) / 7.0), {"units": "1"})},
                          coords={"sample": ("sample", sample.astype(np.int32), {"units": "1"})})

    def fill_wide(a, b, records):
        records["sample"], records["v"] = np.arange(a, b), wide(a, b)["v"].values

    path = tmp_path / "wide.nc"
    with RecordStore(path, "fp", SPAN, template=wide(0, 0), attrs={"title": "t"}) as rs:
        run_records(rs, BLOCKS, fill_wide, slice_size=SLICE)
        rs.finalize()
    if None in direct_fds or not pages["direct"]:
        pytest.skip("this filesystem refuses direct I/O: every page goes through the page cache")
    assert not pages["direct"] & pages["cached"]
    expected = wide(*SPAN).assign_attrs(title="t")
    expected.to_netcdf(tmp_path / "library.nc", format="NETCDF3_64BIT", unlimited_dims=["sample"])
    xr.testing.assert_identical(read(path), read(tmp_path / "library.nc"))
    assert subprocess.run(["sha256sum", "-c", "--quiet", "wide.nc.sha256"], cwd=tmp_path).returncode == 0
