"""Merging shards of a multirun: completeness, consistency, lazy concatenation, aggregated config sweeps.

The shard files here are written directly (no TensorFlow): points from a closed form, values and
Jacobians of f(x) = a * x0 * x1 (a per "model"), so every merged number has an exact reference.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml

from sensitivity.datasets import by_name, write_atomic
from sensitivity.sweep.stored import StoredSweep
from sensitivity.errors import DataError
from sensitivity.sweep.merge import merge, merged_attrs, whole_grid_config
from sensitivity.sweep.merge_plan import MissingShards, plan_merge
from workflows.plumbing.multirun import find_runs, rerun_command
from tests.helpers.cf import cf_errors

SLOPES = {"a": 1.0, "b": -2.0}


def points(start: int, stop: int) -> np.ndarray:
    """A closed-form design: point i is (i / 7, 1 + i / 3)."""
    i = np.arange(start, stop, dtype=np.float64)
    return np.stack([i / 7, 1 + i / 3], axis=1)


def exact(start: int, stop: int, model: str = "a") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, a = points(start, stop), SLOPES[model]
    y = (a * x[:, 0] * x[:, 1])[:, None]
    jac = np.stack([a * x[:, 1], a * x[:, 0]], axis=1)[:, None, :]
    return x, y.astype(np.float32), jac.astype(np.float32)


def write_shard(root: Path, n: int, shard: int, num_shards: int, *, model: str = "a", seed: int = 0,
                surrogate_hash: str = "sha256:abc", extra: list[str] = (), overrides_file: bool = True,
                output: str = "p") -> Path:
    """One job directory of a multirun, as `sensitivity sweep -m ...` leaves it."""
    start, stop = n * shard // num_shards, n * (shard + 1) // num_shards
    overrides = [f"model={model}", f"grid.n={n}", f"grid.shard={shard}", f"grid.num_shards={num_shards}", *extra]
    job = root / ",".join(sorted(overrides))
    x, y, jac = exact(start, stop, model)
    config = {"model": {"source": f"models:{model}"}, "grid": {"kind": "sobol", "n": n, "seed": seed, "shard": shard,
                                                                "num_shards": num_shards},
              "output_dir": str(job), "progress": False}
    ds = xr.Dataset(
        {"x": (("sample", "parameter"), x, {"long_name": "parameter value at the point", "units": "1"}),
         "y": (("sample", "output"), y, {"long_name": "product", "units": "1"}),
         "jacobian": (("sample", "output", "parameter"), jac, {"long_name": "derivative of product", "units": "1"})},
        coords={"sample": ("sample", np.arange(start, stop, dtype=np.int32), {"long_name": "index", "units": "1"}),
                "parameter": ("parameter", np.arange(2, dtype=np.int32), {"long_name": "parameter index", "units": "1"}),
                "parameter_name": ("parameter", np.array(["u", "v"], dtype=object), {"long_name": "parameter name"}),
                "output": ("output", np.arange(1, dtype=np.int32), {"long_name": "output index", "units": "1"}),
                "output_name": ("output", np.array([output], dtype=object), {"long_name": "output name"})},
        attrs={"Conventions": "CF-1.8", "title": "test sweep", "history": "t: sweep", "config": yaml.safe_dump(config),
               "surrogate": f"models:{model}", "surrogate_hash": surrogate_hash, "seed": str(seed),
               "shard": f"{shard} of {num_shards}", "sample_range": f"{start} {stop}",
               "nonfinite_values": 0, "nonfinite_jacobian": 1})
    write_atomic(ds, job / "sweep.nc")
    if overrides_file:
        (job / ".hydra").mkdir(parents=True, exist_ok=True)
        (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
        (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"config_name": "sweep"}}}))
    return job


def sweep_dir(root: Path, n: int = 10, num_shards: int = 3, **kw) -> list[Path]:
    return [write_shard(root, n, i, num_shards, **kw) for i in range(num_shards)]


def plan(root: Path):
    return plan_merge(find_runs(root), root)


def test_shards_merge_into_the_whole_grid_chunked_on_disk(tmp_path):
    jobs = sweep_dir(tmp_path / "multirun", n=10, num_shards=3)  # uneven: 3, 3, 4 points
    p = plan(tmp_path / "multirun")
    assert p.keys == () and [s.start for s in p.cells[0].shards] == [0, 3, 6]
    out = merge(p, tmp_path / "merged.nc", attrs={**merged_attrs(p), "config": whole_grid_config(p)}, chunk=4)
    ds = xr.open_dataset(out)
    x, y, jac = exact(0, 10)
    np.testing.assert_array_equal(ds["sample"].values, np.arange(10))
    assert ds["sample"].dtype == np.int32
    np.testing.assert_array_equal(ds["x"].values, x)
    np.testing.assert_array_equal(ds["y"].values, y)
    np.testing.assert_array_equal(ds["jacobian"].values, jac)
    assert ds["jacobian"].encoding["chunksizes"] == (4, 1, 2) and ds["x"].encoding["chunksizes"] == (4, 2)
    assert ds.attrs["merged_shards"] == 3 and ds.attrs["nonfinite_jacobian"] == 3
    config = yaml.safe_load(ds.attrs["config"])
    assert (config["grid"]["shard"], config["grid"]["num_shards"]) == (0, 1)
    with StoredSweep(out) as merged:
        assert [(b.start, b.stop) for b in merged.blocks(4)] == [(0, 4), (4, 8), (8, 10)]
    assert all(j.exists() for j in jobs)


def test_missing_and_unfinished_shards_are_refused_with_the_rerun_command(tmp_path):
    root = tmp_path / "multirun"
    jobs = sweep_dir(root, n=12, num_shards=4)
    (jobs[1] / "sweep.nc").unlink()  # killed: two finished parts left on disk
    (jobs[1] / "sweep.nc.parts").mkdir()
    for name in ("part-000000000003-000000000004.nc", "part-000000000004-000000000005.nc"):
        (jobs[1] / "sweep.nc.parts" / name).touch()
    shutil.rmtree(jobs[3])  # never ran
    with pytest.raises(MissingShards) as err:
        plan(root)
    message = str(err.value)
    assert "\n" not in message
    assert "missing shard(s) 1, 3 of 4" in message
    assert f"1: unfinished, 2 part(s) on disk in {jobs[1]}" in message and "3: never ran" in message
    command = rerun_command(err.value, root)  # the application's: it knows the command line and Hydra's layout
    assert command.startswith("sensitivity sweep -m model=a grid.n=12 grid.shard=1,3 grid.num_shards=4")
    assert command.endswith(f"hydra.sweep.dir={root}")


def test_overlapping_shards_are_refused(tmp_path):
    root = tmp_path / "multirun"
    jobs = sweep_dir(root, n=10, num_shards=2)
    shutil.copytree(jobs[1], root / "copy")  # the same shard twice
    with pytest.raises(DataError, match=r"shard 1 of 2 twice \(overlapping samples\)"):
        plan(root)


def test_shards_of_different_splits_are_refused(tmp_path):
    root = tmp_path / "multirun"
    write_shard(root, 10, 0, 2)
    write_shard(root, 10, 1, 4)
    with pytest.raises(DataError, match=r"shards of different splits \(num_shards \[2, 4\]"):
        plan(root)


def test_a_gap_in_sample_indices_is_refused(tmp_path):
    root = tmp_path / "multirun"
    jobs = sweep_dir(root, n=10, num_shards=2)
    with xr.open_dataset(jobs[1] / "sweep.nc") as ds:
        moved = ds.load().assign_coords(sample=ds["sample"] + 1).assign_attrs(sample_range="6 11")
    write_atomic(moved, jobs[1] / "sweep.nc")
    with pytest.raises(DataError, match=r"gap in sample indices: .*starts at 6, expected 5"):
        plan(root)


@pytest.mark.parametrize("change, message", [
    (dict(seed=1), r"config `grid.seed` is 1 there, 0 here"),
    (dict(surrogate_hash="sha256:other"), r"was computed with another surrogate"),
])
def test_mismatched_shards_are_refused_naming_them(tmp_path, change, message):
    root = tmp_path / "multirun"
    write_shard(root, 10, 0, 2, overrides_file=False)
    odd = write_shard(root, 10, 1, 2, overrides_file=False, **change)
    with pytest.raises(DataError, match=message) as err:
        plan(root)
    assert str(odd / "sweep.nc") in str(err.value)


def test_runs_overriding_other_keys_are_refused(tmp_path):
    root = tmp_path / "multirun"
    write_shard(root, 10, 0, 1)
    write_shard(root, 10, 0, 1, model="b", extra=["grid.seed=3"])
    with pytest.raises(DataError, match=r"do not override the same keys \(only some set \['grid.seed'\]\)"):
        plan(root)


def test_an_incomplete_product_of_swept_values_is_refused(tmp_path):
    root = tmp_path / "multirun"
    for model, n in (("a", 4), ("a", 6), ("b", 4)):
        write_shard(root, n, 0, 1, model=model)
    with pytest.raises(DataError, match=r"no run for model=b grid.n=6"):
        plan(root)


def test_a_config_sweep_is_aggregated_along_dims_named_after_the_swept_keys(tmp_path):
    root = tmp_path / "multirun"
    for model in ("b", "a"):
        for n in (6, 4):
            sweep_dir(root, n=n, num_shards=2, model=model)
    p = plan(root)
    assert p.keys == ("model", "grid.n") and p.dims == ("model", "grid_n")
    out = merge(p, tmp_path / "merged.nc", attrs={"Conventions": "CF-1.8", "title": "t", **merged_attrs(p)})
    ds = by_name(xr.open_dataset(out))
    assert dict(ds.sizes) == {"model": 2, "grid_n": 2, "sample": 6, "parameter": 2, "output": 1}
    assert list(ds["model_name"].values) == ["a", "b"] and ds["model"].dtype == np.int32
    assert list(ds["grid_n"].values) == [4, 6] and ds["grid_n"].attrs["override_key"] == "grid.n"
    np.testing.assert_array_equal(ds["n_samples"].values, [[4, 6], [4, 6]])
    for model in ("a", "b"):
        for n in (4, 6):
            cell = ds.sel(model_name=model, grid_n=n)
            x, y, jac = exact(0, n, model)
            np.testing.assert_array_equal(cell["jacobian"].values[:n], jac)
            np.testing.assert_array_equal(cell["y"].values[:n], y)
            assert np.isnan(cell["x"].values[n:]).all() and np.isnan(cell["jacobian"].values[n:]).all()
    assert ds["jacobian"].dims == ("model", "grid_n", "sample", "output", "parameter")
    assert ds["jacobian"].encoding["chunksizes"][:2] == (1, 1)
    assert yaml.safe_load(ds.attrs["cell_configs"])["model=a grid.n=4"].startswith("grid:")
    assert cf_errors(out) == []


def test_an_empty_directory_is_refused(tmp_path):
    with pytest.raises(DataError, match="no runs found"):
        plan(tmp_path)
    with pytest.raises(DataError, match="not a directory"):
        find_runs(tmp_path / "nowhere")


def test_cells_that_cannot_share_a_dataset_are_refused(tmp_path):
    root = tmp_path / "multirun"
    write_shard(root, 4, 0, 1, model="a")
    write_shard(root, 4, 0, 1, model="b", output="q")
    with pytest.raises(DataError, match=r"the runs of model=a,b cannot share one dataset"):
        merge(plan(root), tmp_path / "merged.nc", attrs={})
    assert not (tmp_path / "merged.nc").exists()


def test_zarr_store_holds_the_same_dataset(tmp_path):
    pytest.importorskip("zarr")
    root = tmp_path / "multirun"
    for model in ("a", "b"):
        sweep_dir(root, n=10, num_shards=2, model=model)
    p = plan(root)
    nc = xr.open_dataset(merge(p, tmp_path / "merged.nc", attrs={"title": "t"}))
    store = merge(p, tmp_path / "merged.zarr", attrs={"title": "t"}, format="zarr")
    assert store.is_dir() and not (tmp_path / ".merged.zarr.tmp").exists()
    xr.testing.assert_identical(xr.open_zarr(store).load(), nc.load())


def test_a_shard_that_changed_since_it_was_written_is_refused(tmp_path):
    from sensitivity.datasets import record_checksum

    jobs = sweep_dir(tmp_path / "multirun")
    for job in jobs:
        record_checksum(job / "sweep.nc")
    merge(plan_merge(find_runs(tmp_path / "multirun"), tmp_path / "multirun"), tmp_path / "ok.nc", attrs={})
    with xr.open_dataset(jobs[1] / "sweep.nc") as ds:
        edited = ds.load()
    edited["y"][0] = 1e23
    edited.to_netcdf(tmp_path / "edited.nc")
    shutil.move(tmp_path / "edited.nc", jobs[1] / "sweep.nc")
    with pytest.raises(DataError, match=r"does not match its checksum record sweep.nc.sha256 .*rerun that shard"):
        plan_merge(find_runs(tmp_path / "multirun"), tmp_path / "multirun")


def test_a_shard_holding_other_samples_than_it_records_is_refused(tmp_path):
    jobs = sweep_dir(tmp_path / "multirun", n=12)
    with xr.open_dataset(jobs[2] / "sweep.nc") as ds:
        short = ds.load().isel(sample=slice(0, 2))  # what a second run that rewrote it left (issue 13, case 1)
    short.to_netcdf(tmp_path / "short.nc")
    shutil.move(tmp_path / "short.nc", jobs[2] / "sweep.nc")
    with pytest.raises(DataError, match=r"holds samples \[8, 10\) but records sample_range 8 12"):
        plan_merge(find_runs(tmp_path / "multirun"), tmp_path / "multirun")


def test_a_shard_being_written_refuses_the_merge(tmp_path):
    from sensitivity.datasets.run_lock import RunLock

    jobs = sweep_dir(tmp_path / "multirun")
    plan = plan_merge(find_runs(tmp_path / "multirun"), tmp_path / "multirun")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom sensitivity.datasets.run_lock import RunLock\n"
                               "RunLock(sys.argv[1]).acquire()\nprint('held', flush=True)\ntime.sleep(60)",
                               str(jobs[0] / "sweep.nc.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DataError, match=rf"sweep.nc is being written by another run \(pid {holder.pid} "):
            merge(plan, tmp_path / "m.nc", attrs={})
    finally:
        holder.kill()
        holder.wait()
    assert not (tmp_path / "m.nc").exists()
    out = merge(plan, tmp_path / "m.nc", attrs={})
    assert subprocess.run(["sha256sum", "-c", "--quiet", "m.nc.sha256"], cwd=tmp_path).returncode == 0
    assert not (jobs[0] / "sweep.nc.lock").exists() and out.is_file()
    RunLock(jobs[0] / "sweep.nc.lock").acquire()  # released: a sweep may write it again
