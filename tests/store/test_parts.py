"""Fault injection on the verified block store: every fault ends refused (one line) or equal to a clean run."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import xarray as xr

from sensitivity.errors import DataError
from sensitivity.store.parts import PartStore, run_blocks
from tests.helpers import ROOT
from tests.helpers.blocks import BLOCKS, SPAN, block_dataset

def expected() -> xr.Dataset:
    return block_dataset(*SPAN)


def run(path, fingerprint="fp", blocks=BLOCKS, span=SPAN, compute=block_dataset):
    with PartStore(path, fingerprint, span=span) as store:
        run_blocks(store, blocks, compute)
        return store.finalize({"title": "t"})


def assert_equal_to_clean(path) -> None:
    with xr.open_dataset(path) as ds:
        xr.testing.assert_identical(ds.load().drop_attrs(deep=False), expected())
        assert ds.attrs["title"] == "t" and "fingerprint" not in ds.attrs
    assert not path.with_name(path.name + ".parts").exists() and not path.with_name(path.name + ".lock").exists()


def interrupted(path, fingerprint="fp", after=2, blocks=BLOCKS):
    """Write ``after`` blocks, then die the way a kill does (the lock is dropped with the store)."""
    count = []

    def compute(a, b):
        if len(count) == after:
            raise KeyboardInterrupt("killed")
        count.append(a)
        return block_dataset(a, b)

    with pytest.raises(KeyboardInterrupt):
        run(path, fingerprint, blocks=blocks, compute=compute)
    return sorted(path.with_name(path.name + ".parts").glob("part-*.nc"))


def test_resume_after_an_interruption_equals_a_clean_run(tmp_path):
    path = tmp_path / "r.nc"
    assert len(interrupted(path)) == 2
    assert_equal_to_clean(run(path))


@pytest.mark.parametrize("damage", ["flip", "truncate", "drop_record", "empty"])
def test_a_damaged_part_is_recomputed_with_a_warning(tmp_path, damage, caplog):
    path = tmp_path / "r.nc"
    part = interrupted(path)[1]
    data = bytearray(part.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
        part.write_bytes(bytes(data))
    elif damage == "truncate":
        part.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "drop_record":
        part.with_name(part.name + ".sha256").unlink()
    else:
        part.write_bytes(b"")
    assert_equal_to_clean(run(path))
    assert f"{part.name}" in caplog.text and "recomputed" in caplog.text


def test_a_part_damaged_after_resume_is_never_assembled(tmp_path, caplog):
    path = tmp_path / "r.nc"
    with PartStore(path, "fp", span=SPAN) as store:
        run_blocks(store, BLOCKS, block_dataset)
        part = sorted(store.parts.glob("part-*.nc"))[0]
        data = bytearray(part.read_bytes())
        data[-100] ^= 0x01
        part.write_bytes(bytes(data))
        with pytest.raises(DataError, match=r"gap at sample 3"):
            store.finalize({})
    assert not path.exists() and "checksum mismatch" in caplog.text


def test_parts_of_another_computation_are_refused_even_without_the_fingerprint_file(tmp_path):
    path = tmp_path / "r.nc"
    interrupted(path, fingerprint="grid seed 1")
    with pytest.raises(DataError, match=r"different computation .* delete it to start over"):
        run(path, "grid seed 2")
    (path.with_name("r.nc.parts") / "FINGERPRINT").unlink()
    with pytest.raises(DataError, match=r"different computation") as err:
        run(path, "grid seed 2")
    assert "\n" not in str(err.value) and not path.exists()
    assert_equal_to_clean(run(path, "grid seed 1"))  # the owner still resumes


def test_coverage_gaps_and_overlaps_are_refused(tmp_path):
    path = tmp_path / "r.nc"
    with PartStore(path, "fp", span=(0, 10)) as store:
        for a, b in [(0, 4), (6, 10)]:
            store.write(block_dataset(a, b), a, b)
        with pytest.raises(DataError, match=r"gap at sample 4"):
            store.finalize({})
        store.write(block_dataset(3, 6), 3, 6)
        with pytest.raises(DataError, match=r"overlap at sample 3"):
            store.finalize({})
    assert not path.exists()
    with PartStore(tmp_path / "s.nc", "fp", span=(0, 10)) as store:
        store.write(block_dataset(0, 4), 0, 4)
        with pytest.raises(DataError, match=r"cover \[0, 4\) of \[0, 10\)"):
            store.finalize({})


def test_a_part_whose_content_disagrees_with_its_range_is_refused(tmp_path):
    with PartStore(tmp_path / "r.nc", "fp", span=(0, 4)) as store:
        store.write(block_dataset(0, 3), 0, 4)  # a writer bug: 3 samples for [0, 4)
        assert store.done() == set()


def test_full_disk_fails_in_one_line_and_a_rerun_resumes(tmp_path, monkeypatch):
    path = tmp_path / "r.nc"
    real = xr.Dataset.to_netcdf
    calls = []

    def full(self, target, *args, **kwargs):
        calls.append(target)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, target, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    with pytest.raises(DataError, match=r"no space left on device; free space or choose another run directory") as e:
        run(path)
    assert "\n" not in str(e.value) and not path.exists()
    monkeypatch.undo()
    assert not list(path.with_name("r.nc.parts").glob(".*.tmp"))
    assert_equal_to_clean(run(path))


def test_an_interrupted_assembly_leaves_no_final_file_and_resumes(tmp_path, monkeypatch):
    path = tmp_path / "r.nc"
    real = os.replace

    def die_on_final_rename(src, dst):
        if str(dst) == str(path):
            raise KeyboardInterrupt("killed during assembly")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", die_on_final_rename)
    with pytest.raises(KeyboardInterrupt):
        run(path)
    monkeypatch.undo()
    assert not path.exists()
    assert_equal_to_clean(run(path))


# ----------------------------------------------------------------------------- other processes

HOLD = """
import sys, time
from sensitivity.store.parts import PartStore
store = PartStore(sys.argv[1], "fp", span=(3, 40))
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_run_is_refused_naming_the_holder_and_a_killed_holder_blocks_nothing(tmp_path):
    path = tmp_path / "r.nc"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DataError, match=rf"being written by another run \(pid {holder.pid} on .*\); wait") as e:
            run(path)
        assert "\n" not in str(e.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert path.with_name("r.nc.lock").exists()  # the stale file of a killed holder...
    assert_equal_to_clean(run(path))             # ...blocks nothing


ASSEMBLE_AND_DIE = """
import os, signal, sys
import numpy as np, xarray as xr
from sensitivity import datasets
from sensitivity.store.parts import PartStore, run_blocks
sys.path.insert(0, {root!r})
from tests.helpers.blocks import BLOCKS, SPAN, block_dataset
when = sys.argv[2]
real = os.replace
def replace(src, dst):
    if when == "before" and str(dst) == sys.argv[1]:
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)
    if when == "after" and str(dst) == sys.argv[1]:
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
with PartStore(sys.argv[1], "fp", span=SPAN) as store:
    run_blocks(store, BLOCKS, block_dataset)
    store.finalize({{"title": "t"}})
"""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
def test_kill_9_during_assembly(tmp_path, when):
    """Killed just before or just after the final rename: no final file, or a complete one; a rerun completes."""
    path = tmp_path / "r.nc"
    script = ASSEMBLE_AND_DIE.format(root=str(ROOT))
    died = subprocess.run([sys.executable, "-c", script, str(path), when], cwd=ROOT, capture_output=True)
    assert died.returncode == -signal.SIGKILL, died.stderr[-2000:]
    if when == "before":
        assert not path.exists()
    else:
        with xr.open_dataset(path) as ds:
            xr.testing.assert_identical(ds.load().drop_attrs(deep=False), expected())
    assert_equal_to_clean(run(path))


SLOW_RUN = textwrap.dedent("""
    import sys, time
    from sensitivity.store.parts import PartStore, run_blocks
    sys.path.insert(0, {root!r})
    from tests.helpers.blocks import BLOCKS, SPAN, block_dataset
    def slow(a, b):
        time.sleep(0.05)
        return block_dataset(a, b)
    with PartStore(sys.argv[1], "fp", span=SPAN) as store:
        run_blocks(store, BLOCKS, slow)
        store.finalize({{"title": "t"}})
""")


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume_equals_a_clean_run(tmp_path):
    rng = np.random.default_rng(13)
    script = SLOW_RUN.format(root=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "clean.nc")], cwd=ROOT, check=True)
    clean = time.perf_counter() - t0  # interpreter start, imports, 5 blocks, assembly
    for trial in range(2):
        path = tmp_path / f"r{trial}.nc"
        for _ in range(8):
            proc = subprocess.Popen([sys.executable, "-c", script, str(path)], cwd=ROOT, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.5, 1.0) * clean)
            proc.send_signal(signal.SIGKILL)
            if proc.wait() == 0:
                break
        assert_equal_to_clean(run(path))


# ----------------------------------------------------------------------------- reading a stored sweep


def stored_sweep_file(tmp_path):
    """A sweep of y_t = sum_i t * i * x_i on a `time` axis in days since an epoch: J[t, i] = t * i."""
    from sensitivity.datasets import sweep_dataset, write_atomic
    from sensitivity.outputs.spec import OutputDim, OutputSpec

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (50, 2))
    t = np.arange(1.0, 5.0)
    jac = np.broadcast_to(t[:, None] * np.arange(1, 3), (50, 4, 2)).copy()
    spec = OutputSpec("cases", "d-1", (OutputDim("time", tuple(t), "days since 2020-01-01", "time"),), "cases")
    ds = sweep_dataset(np.arange(50), x, np.einsum("stp,sp->st", jac, x), jac, parameter_names=["a", "b"],
                       parameter_units=["m", "s"], parameter_long_names=None, output=spec)
    path = write_atomic(ds.assign_attrs(sample_range="0 50", surrogate_hash="sha256:abc"), tmp_path / "sweep.nc")
    return path, x, jac


def test_stored_sweep_header_and_blocks(tmp_path):
    from sensitivity.sweep.stored import StoredSweep

    path, x, jac = stored_sweep_file(tmp_path)
    with StoredSweep(path) as sweep:
        assert sweep.parameter_names == ("a", "b") and sweep.parameter_units == ("m", "s")
        assert sweep.output.name == "cases" and sweep.output.dim_names == ("time",) and sweep.output.units == "d-1"
        assert sweep.output.dims[0].values == (1.0, 2.0, 3.0, 4.0)  # stored numbers, not decoded dates
        assert (sweep.size, sweep.sample_range, sweep.surrogate_hash) == (50, (0, 50), "sha256:abc")
        blocks = list(sweep.blocks(16))
        assert [(b.start, b.stop) for b in blocks] == [(0, 16), (16, 32), (32, 48), (48, 50)]
        flat = [b.flat(sweep.output) for b in blocks]
    np.testing.assert_array_equal(np.concatenate([f[0] for f in flat]), x)
    np.testing.assert_array_equal(np.concatenate([f[2] for f in flat]), jac)
    np.testing.assert_allclose(np.concatenate([f[1] for f in flat]), (jac * x[:, None, :]).sum(-1))


def test_stored_sweep_map_resumes_and_refuses_a_changed_sweep(tmp_path):
    from sensitivity.datasets import record_checksum
    from sensitivity.sweep.stored import BlockAnalysis, StoredSweep

    path, x, jac = stored_sweep_file(tmp_path)
    out = tmp_path / "norm.nc"

    def norm(blk):  # |J| per point and time: sqrt(t^2 (1 + 4))
        return xr.Dataset({"norm": (("sample", "time"), np.sqrt((blk.data["jacobian"].values ** 2).sum(-1)))},
                          coords={"sample": blk.data["sample"]})

    def dies_at_20(blk):
        if blk.start >= 20:
            raise KeyboardInterrupt("killed")
        return norm(blk)

    with StoredSweep(path) as sweep, pytest.raises(KeyboardInterrupt):
        sweep.map_to(out, BlockAnalysis(dies_at_20), fingerprint="norm", attrs={}, block=10)
    with StoredSweep(path) as sweep:
        result = sweep.map_to(out, BlockAnalysis(norm), fingerprint="norm", attrs={"title": "norms"}, block=10)
    with xr.open_dataset(result, decode_times=False) as ds:
        np.testing.assert_allclose(ds["norm"].values, np.sqrt(5) * np.arange(1.0, 5.0)[None, :].repeat(50, 0))
        np.testing.assert_array_equal(ds["sample"].values, np.arange(50))

    with StoredSweep(path) as sweep, pytest.raises(KeyboardInterrupt):
        sweep.map_to(tmp_path / "again.nc", BlockAnalysis(dies_at_20), fingerprint="norm", attrs={}, block=10)
    record_checksum(path)
    with xr.open_dataset(path) as ds:
        changed = ds.load()
    changed["x"][0, 0] = 0.5
    changed.to_netcdf(tmp_path / "changed.nc")
    os.replace(tmp_path / "changed.nc", path)  # another sweep at the same path: its parts are not adopted
    with StoredSweep(path) as sweep, pytest.raises(DataError, match=r"does not match its checksum record sweep.nc"):
        sweep.map_to(tmp_path / "again.nc", BlockAnalysis(norm), fingerprint="norm", attrs={}, block=10)
    path.with_name("sweep.nc.sha256").unlink()
    with StoredSweep(path) as sweep, pytest.raises(DataError, match="different computation"):
        sweep.map_to(tmp_path / "again.nc", BlockAnalysis(norm), fingerprint="norm", attrs={}, block=10)


def test_assembly_keeps_at_most_OPEN_PARTS_part_files_open_and_equals_a_clean_run(tmp_path, monkeypatch):
    import sensitivity.store.parts as parts

    blocks = [(a, min(a + 1, SPAN[1])) for a in range(*SPAN)]  # one part per sample: more parts than the cap
    assert len(blocks) > parts.OPEN_PARTS
    seen, write = [], parts.write_atomic

    def counting(ds, path, **kwargs):  # the parts' files open while the result is written from them
        seen.append(sum(".nc.parts" in os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")))
        return write(ds, path, **kwargs)

    monkeypatch.setattr(parts, "write_atomic", counting)
    with PartStore(tmp_path / "r.nc", "fp", span=SPAN) as store:
        run_blocks(store, blocks, block_dataset)
        store.finalize({"title": "t"})
    assert 0 < seen[-1] <= parts.OPEN_PARTS
    assert_equal_to_clean(tmp_path / "r.nc")
