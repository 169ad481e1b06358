"""One dataset from the shards of a multirun, and config sweeps aggregated along new dims.

A sweep too large for one process runs as shards (``grid.shard=i grid.num_shards=n``), usually as
a Hydra multirun (``sensitivity sweep -m grid.shard=range(0,8) grid.num_shards=8``) that leaves one
job directory per shard, ``<multirun>/<overrides>/sweep.nc``, with its overrides in
``.hydra/overrides.yaml``; :func:`~sensitivity.sweep.merge_plan.plan_merge` checks that they are one computation
split cleanly (:mod:`sensitivity.sweep.merge_plan`); :func:`open_merged` opens them lazily (dask) as one dataset chunked along ``sample``, and
:func:`merge` writes it, so memory stays at a few chunks whatever the size. Each shard must hold
exactly the ``sample_range`` it records and match its checksum record (``sweep.nc.sha256``); the
merge holds every shard's run lock while it reads them (a shard still being written refuses it) and
writes the result atomically with its own checksum record.

When the multirun also swept configuration keys (``-m model=a,b grid.n=1000,2000 grid.shard=0,1``),
every combination of their values is a *cell*, merged from its own shards. Cells are aggregated
along new dims named after the swept keys (``grid.n`` -> ``grid_n``) whose coordinates are the
override values: numbers as a numeric dimension coordinate, anything else as an integer index with
a ``<dim>_name`` label (``ds.sel(model_name="a")`` after :func:`~sensitivity.datasets.by_name`).
Cells of different grid sizes are outer-joined on ``sample``: the union of their indices, NaN where
a cell has no such point, and ``n_samples(<swept dims>)`` holds each cell's own size. The cells
must form the full product of the swept values and agree on everything but the swept keys' data
(parameters, outputs and their labels).
"""
from __future__ import annotations

import json
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np
import yaml

from sensitivity.datasets import (ENCODING_ENGINE, record_checksum, sample_dtype, write_atomic,
                                  write_directory_atomic)
from sensitivity.datasets.run_lock import RunBusy, RunLock
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.sweep.merge_plan import YAML_LOADER, Cell, Plan

xr = lazy_import("xarray")

#: Target size of one on-disk chunk of the largest variable [bytes].
CHUNK_BYTES = 32 * 2**20


# ----------------------------------------------------------------------------- combining


@contextmanager
def open_merged(plan: Plan, chunk: int | None = None) -> Iterator[xr.Dataset]:
    """The merged dataset, lazily (dask), chunked along ``sample`` in memory and for the disk.

    Parameters
    ----------
    plan
        From :func:`~sensitivity.sweep.merge_plan.plan_merge`.
    chunk
        Samples per chunk; default: about :data:`CHUNK_BYTES` of the largest variable, a power of 2.

    Yields
    ------
    xarray.Dataset
        The cells concatenated along ``sample`` (and aggregated along the swept keys' dims), with
        netCDF ``chunksizes`` encodings along ``sample`` so block reads of the written file are cheap.
    """
    with ExitStack() as stack:
        size = max(c.size for c in plan.cells)
        if chunk is None:
            with xr.open_dataset(plan.reference.path, engine=ENCODING_ENGINE) as first:
                chunk = sample_chunk(first, size)
        cells = [stack.enter_context(_open_cell(c, chunk)) for c in plan.cells]
        ds = cells[0] if not plan.keys else _aggregate(plan, cells)
        ds = ds.assign_coords(sample=ds["sample"].astype(sample_dtype(size)).assign_attrs(ds["sample"].attrs))
        ds = ds.assign({k: v.chunk({"sample": chunk}) for k, v in ds.data_vars.items() if "sample" in v.dims})
        # labels (sweeps store them as character arrays): in memory, so the writer knows they are strings
        ds = ds.assign_coords({k: v.load() for k, v in ds.coords.items()
                               if v.dtype == object and "sample" not in v.dims})
        yield _disk_chunks(ds, chunk, new_dims=plan.dims)


def _open_cell(cell: Cell, chunk: int):
    return xr.open_mfdataset([s.path for s in cell.shards], combine="nested", concat_dim="sample",
                             data_vars="minimal", coords="minimal", compat="override", join="override",
                             engine=ENCODING_ENGINE, chunks={"sample": chunk}, parallel=False)


def sample_chunk(ds: xr.Dataset, size: int, target_bytes: int = CHUNK_BYTES) -> int:
    """Samples per chunk (at most ``size``): the largest power of 2 whose chunk of ``ds``'s largest
    variable fits ``target_bytes``."""
    per_sample = max((v.dtype.itemsize * int(np.prod([n for d, n in v.sizes.items() if d != "sample"]))
                      for v in ds.data_vars.values() if "sample" in v.dims), default=1)
    chunk = 1 << max(0, int(np.log2(max(1, target_bytes // max(per_sample, 1)))))
    return int(min(chunk, max(size, 1)))


def _aggregate(plan: Plan, cells: list[xr.Dataset]) -> xr.Dataset:
    """Nest the cells along one new dim per swept key (outer join on ``sample``) and label the dims."""
    dims, axes = plan.dims, plan.axes
    by_values = dict(zip((c.values for c in plan.cells), cells))

    def nest(level: int, prefix: tuple[str, ...]) -> xr.Dataset:
        if level == len(dims):
            return by_values[prefix]
        members = [nest(level + 1, prefix + (v,)) for v in axes[level]]
        try:
            return xr.concat(members, dim=dims[level], join="outer", coords="minimal", compat="equals",
                             combine_attrs="drop_conflicts")
        except (ValueError, KeyError) as err:
            raise DataError(f"{plan.root}: the runs of {plan.keys[level]}={','.join(axes[level])} cannot share one "
                            f"dataset: {str(err).splitlines()[0]}") from None

    ds = nest(0, ())
    sizes = np.zeros([len(a) for a in axes], dtype=np.int32)
    for cell in plan.cells:
        sizes[tuple(a.index(v) for a, v in zip(axes, cell.values))] = cell.size
    coords: dict[str, Any] = {}
    for key, dim, values in zip(plan.keys, dims, axes):
        coords.update(_override_coords(key, dim, values))
    ds = ds.assign_coords(coords)
    ds["n_samples"] = xr.Variable(dims, sizes, {"long_name": "number of grid points of the run", "units": "1"})
    return ds


def _override_coords(key: str, dim: str, values: list[str]) -> dict[str, xr.Variable]:
    """Numbers as a numeric dimension coordinate; anything else as an index with ``<dim>_name`` labels."""
    parsed = [yaml.load(v, Loader=YAML_LOADER) if v else None for v in values]
    attrs = {"long_name": f"value of the override {key}", "override_key": key}
    if all(isinstance(p, int) and not isinstance(p, bool) for p in parsed) and max(map(abs, parsed)) < 2**31:
        return {dim: xr.Variable(dim, np.asarray(parsed, dtype=np.int32), {**attrs, "units": "1"})}
    if all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in parsed):
        return {dim: xr.Variable(dim, np.asarray(parsed, dtype=np.float64), {**attrs, "units": "1"})}
    return {dim: xr.Variable(dim, np.arange(len(values), dtype=np.int32),
                             {"long_name": f"index of the value of the override {key}", "units": "1"}),
            f"{dim}_name": xr.Variable(dim, np.asarray(values, dtype=object), attrs)}


def _disk_chunks(ds: xr.Dataset, chunk: int, new_dims: tuple[str, ...]) -> xr.Dataset:
    """Encodings for the written file: ``sample`` in chunks of ``chunk`` (one cell per chunk along swept dims)."""
    ds = ds.copy()
    for name, var in ds.variables.items():
        keep = {k: var.encoding[k] for k in ("dtype", "_FillValue") if k in var.encoding}
        if name in ds.dims:
            keep["_FillValue"] = None  # coordinate variables hold no missing values (CF 5)
        if "sample" in var.dims and var.dtype != object:
            keep["chunksizes"] = tuple(1 if d in new_dims else min(chunk, n) if d == "sample" else n
                                       for d, n in var.sizes.items())
        var.encoding = keep
    return ds


# ----------------------------------------------------------------------------- writing


def merged_attrs(plan: Plan) -> dict[str, str | int]:
    """Attributes a merge adds: shard count, summed non-finite counts, swept keys and cell configs, and the
    shards' recorded settings where they all record the same."""
    shards = [s for c in plan.cells for s in c.shards]
    attrs: dict[str, str | int] = {
        "merged_shards": len(shards),
        "nonfinite_values": int(sum(int(s.attrs.get("nonfinite_values", 0)) for s in shards)),
        "nonfinite_jacobian": int(sum(int(s.attrs.get("nonfinite_jacobian", 0)) for s in shards)),
    }
    if "engine" in plan.reference.attrs:
        attrs["engine"] = str(plan.reference.attrs["engine"])
    settings = {str(s.attrs.get("settings", "")) for s in shards}
    if len(settings) == 1 and settings != {""}:  # the shards' grid and space (sensitivity.datasets.settings)
        attrs["settings"] = settings.pop()
    if plan.keys:
        attrs["swept_overrides"] = json.dumps(dict(zip(plan.dims, plan.keys)))
        attrs["cell_configs"] = yaml.safe_dump({plan.label(c): c.shards[0].attrs.get("config", "") for c in plan.cells},
                                               sort_keys=False)
        hashes = {plan.label(c): str(c.shards[0].attrs.get("surrogate_hash", "")) for c in plan.cells}
        if len(set(hashes.values())) > 1:
            attrs["surrogate_hash"] = json.dumps(hashes)
    return attrs


def whole_grid_config(plan: Plan) -> str:
    """The reference shard's config YAML with the shard keys set to the whole grid (shard 0 of 1)."""
    config = yaml.load(str(plan.reference.attrs.get("config", "")), Loader=YAML_LOADER) or {}
    for key, value in ((plan.shard_key, 0), (plan.num_shards_key, 1)):
        node = config
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and leaf in node:
            node[leaf] = value
    return yaml.safe_dump(config, sort_keys=False)


def merge(plan: Plan, path: str | Path, *, attrs: Mapping[str, Any], chunk: int | None = None,
          format: Literal["netcdf", "zarr"] = "netcdf") -> Path:
    """Write the merged dataset of ``plan`` to ``path`` atomically, with global ``attrs``.

    Parameters
    ----------
    format
        ``"netcdf"`` (one file, HDF5 chunks along ``sample``) or ``"zarr"`` (a directory store in the
        Zarr v2 format that every Zarr reader opens, one object per chunk: for results too large for
        one file or read from object storage; needs the ``zarr`` package).
    """
    with ExitStack() as stack:
        hold_inputs(stack, [*plan.files, Path(path)])
        ds = stack.enter_context(open_merged(plan, chunk))
        ds.attrs = dict(attrs)
        if format == "netcdf":
            return write_atomic(ds, path, before_rename=lambda tmp: record_checksum(path, tmp))
        try:
            import zarr  # noqa: F401
        except ImportError:
            raise ConfigError("format=zarr needs the zarr package: pip install zarr") from None
        return write_directory_atomic(path, lambda tmp: _to_zarr(ds, tmp))


def hold_inputs(stack: ExitStack, files: Sequence[Path]) -> None:
    """Hold the run lock of every file (the inputs and the result) until ``stack`` closes, so no sweep
    rewrites a shard while it is merged; a shard being written refuses the merge, naming its run."""
    for f in files:
        lock = RunLock(f.with_name(f.name + ".lock"))
        try:
            lock.acquire()
        except RunBusy:
            raise
        except DataError:  # a read-only input directory: no run of this package can rewrite it
            continue
        stack.callback(lock.release)


def _to_zarr(ds: xr.Dataset, store: Path) -> None:
    """Zarr v2 store, strings as variable-length UTF-8 (the string types every Zarr reader knows)."""
    strings = {k: v.astype(object) for k, v in ds.variables.items() if v.dtype.kind in "US" and k not in ds.dims}
    ds.assign_coords({k: v for k, v in strings.items() if k in ds.coords}).to_zarr(
        store, mode="w", consolidated=True, zarr_format=2)
