"""One dataset from the shards of a multirun, and config sweeps aggregated along new dims.

A sweep too large for one process runs as shards (``grid.shard=i grid.num_shards=n``), usually as
a Hydra multirun (``sensitivity sweep -m grid.shard=range(0,8) grid.num_shards=8``) that leaves one
job directory per shard, ``<multirun>/<overrides>/sweep.nc``, with its overrides in
``.hydra/overrides.yaml``; the application (``workflows.multirun``) reads those into :class:`Run`
objects, and :func:`plan_merge` checks that they are one computation split cleanly -- every grid index exactly once (no gap, no
overlap), the same resolved config except the shard keys, the same surrogate -- and refuses with
a one-line :class:`~sensitivity.errors.DataError` naming the missing or mismatched shards;
:func:`open_merged` opens them lazily (dask) as one dataset chunked along ``sample``, and
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
import re
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np
import yaml

from sensitivity.datasets import (ENCODING_ENGINE, checksum_path, record_checksum, sample_dtype, verify_checksum,
                                  write_atomic, write_directory_atomic)
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.run_lock import RunBusy, RunLock

xr = lazy_import("xarray")

SHARD_KEY = "grid.shard"
NUM_SHARDS_KEY = "grid.num_shards"
#: Keys that change where or how a run reports, not what it computes: never compared, never a dim.
RUN_ONLY_KEYS = ("output_dir", "progress", "plots")
#: Target size of one on-disk chunk of the largest variable [bytes].
CHUNK_BYTES = 32 * 2**20

_SHARD_ATTR = re.compile(r"^\s*(\d+)\s+of\s+(\d+)\s*$")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ----------------------------------------------------------------------------- what is on disk


@dataclass(frozen=True)
class Run:
    """One job directory of a multirun.

    Attributes
    ----------
    directory
        The job directory.
    result
        Its finished result file, or None when the job did not finish.
    overrides
        Its command-line overrides (``.hydra/overrides.yaml``), empty when unknown.
    parts
        Part files an unfinished sweep left in ``<result>.parts/`` (a rerun resumes from them).
    """

    directory: Path
    result: Path | None
    overrides: tuple[str, ...]
    parts: int

    def values(self) -> dict[str, str]:
        """The overrides as ``{key: value}`` (``+``/``~`` prefixes dropped)."""
        return dict(split_override(o) for o in self.overrides)


@dataclass(frozen=True)
class Shard:
    """A finished shard: its run, position ``index of count`` and global sample range ``[start, stop)``."""

    run: Run
    index: int
    count: int
    start: int
    stop: int
    attrs: Mapping[str, Any]
    config: Mapping[str, Any]
    dims: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        assert self.run.result is not None
        return self.run.result


@dataclass(frozen=True)
class Cell:
    """One configuration of the multirun: the swept keys' values and its shards in sample order."""

    values: tuple[str, ...]
    shards: tuple[Shard, ...]

    @property
    def size(self) -> int:
        """Grid points of this configuration."""
        return self.shards[-1].stop


@dataclass(frozen=True)
class Plan:
    """A checked merge: the swept override keys (empty for a plain sharded sweep) and the cells."""

    root: Path
    keys: tuple[str, ...]
    cells: tuple[Cell, ...]
    shard_key: str = SHARD_KEY
    num_shards_key: str = NUM_SHARDS_KEY

    @property
    def files(self) -> list[Path]:
        """Every shard file, cell by cell, in sample order."""
        return [s.path for c in self.cells for s in c.shards]

    @property
    def reference(self) -> Shard:
        """The first shard of the first cell (titles, surrogate, history come from it)."""
        return self.cells[0].shards[0]

    @property
    def dims(self) -> tuple[str, ...]:
        """The new dims, one per swept key: ``grid.n`` -> ``grid_n`` (``override_<name>`` if a file has that dim)."""
        names = []
        for key in self.keys:
            name = re.sub(r"\W", "_", key).strip("_") or "override"
            names.append(f"override_{name}" if name in self.reference.dims or name in names else name)
        return tuple(names)

    @property
    def axes(self) -> list[list[str]]:
        """The values of each swept key, numbers in numeric order, others as text."""
        return [sorted({c.values[i] for c in self.cells}, key=_value_key) for i in range(len(self.keys))]

    def label(self, cell: Cell) -> str:
        """``"grid.n=100 model=a"``: the cell's swept overrides."""
        return " ".join(f"{k}={v}" for k, v in zip(self.keys, cell.values))


def split_override(override: str) -> tuple[str, str]:
    """``"+grid.n=10"`` -> ``("grid.n", "10")``; a deletion ``"~key"`` has the value ``""``."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


# ----------------------------------------------------------------------------- checking


def plan_merge(runs: Sequence[Run], root: str | Path, *, shard_key: str = SHARD_KEY,
               num_shards_key: str = NUM_SHARDS_KEY, ignore_keys: Sequence[str] = RUN_ONLY_KEYS) -> Plan:
    """Check that ``runs`` are complete, consistent shards of one sweep (or of a config sweep).

    Parameters
    ----------
    runs
        The jobs (``workflows.multirun.find_runs`` reads a Hydra multirun's).
    root
        The multirun directory (named in messages).
    shard_key, num_shards_key
        The override keys that split a grid (``grid.shard``, ``grid.num_shards``); they may differ
        between shards, and are never a dim.
    ignore_keys
        Config keys that do not change results (never compared, never a dim).

    Raises
    ------
    MissingShards
        A missing or unfinished shard (a :class:`DataError` that lists them).
    DataError
        No runs; runs that override different keys; a duplicated (overlapping) or
        unfinished shard; a gap or overlap of sample indices; shards whose configs differ in a key
        other than the shard keys, or whose surrogate hashes differ; cells that do not form the
        full product of the swept values.
    """
    root = Path(root)
    if not runs:
        raise DataError(f"{root}: no runs found (no job directory with a result, its parts or .hydra/overrides.yaml)")
    skip = (shard_key, num_shards_key, *ignore_keys)
    fixed = [{k: v for k, v in r.values().items() if not _under(k, skip)} for r in runs]
    if len({frozenset(f) for f in fixed}) > 1:
        everywhere = set.intersection(*(set(f) for f in fixed))
        odd = sorted({k for f in fixed for k in f} - everywhere)
        raise DataError(f"{root}: the runs do not override the same keys (only some set {odd}); "
                        "merge the runs of one multirun at a time")
    order = list(fixed[0])
    keys = tuple(k for k in order if len({f[k] for f in fixed}) > 1)
    groups: dict[tuple[str, ...], list[Run]] = {}
    for run, f in zip(runs, fixed):
        groups.setdefault(tuple(f[k] for k in keys), []).append(run)
    context = dict(shard_key=shard_key, num_shards_key=num_shards_key, skip=skip)
    cells = tuple(_cell(values, members, label=_label(keys, values), **context)
                  for values, members in sorted(groups.items(), key=lambda item: _sort_key(item[0])))
    plan = Plan(root, keys, cells, shard_key, num_shards_key)
    _check_product(plan)
    return plan


def _cell(values: tuple[str, ...], runs: list[Run], *, label: str, shard_key: str, num_shards_key: str,
          skip: tuple[str, ...]) -> Cell:
    shards = [_read_shard(r, shard_key, num_shards_key) for r in runs if r.result is not None]
    unfinished = [r for r in runs if r.result is None]
    counts = {s.count for s in shards} | {int(r.values()[num_shards_key]) for r in unfinished
                                          if r.values().get(num_shards_key, "").isdigit()}
    if len(counts) > 1:
        where = ", ".join(f"{s.run.directory.name}: {s.count}" for s in shards)
        raise DataError(f"{label}shards of different splits (num_shards {sorted(counts)}: {where}); "
                        "merge shards of one split")
    count = counts.pop() if counts else 1
    seen: dict[int, Shard] = {}
    for s in shards:
        if s.index in seen:
            raise DataError(f"{label}shard {s.index} of {count} twice (overlapping samples): "
                            f"{seen[s.index].path} and {s.path}")
        seen[s.index] = s
    missing = [i for i in range(count) if i not in seen]
    if missing:
        raise _missing(label, missing, count, runs, shard_key)
    ordered = sorted(shards, key=lambda s: s.start)
    _check_contiguous(ordered, label)
    _check_same(ordered, label, skip)
    return Cell(values, tuple(ordered))


def _check_contiguous(shards: list[Shard], label: str) -> None:
    """The shards' sample ranges, in order, tile ``[0, size)``: every index exactly once."""
    expected = 0
    for s in shards:
        if s.start != expected:
            what = "gap" if s.start > expected else "overlap"
            raise DataError(f"{label}{what} in sample indices: {s.path} starts at {s.start}, expected {expected}")
        expected = s.stop


def _read_shard(run: Run, shard_key: str, num_shards_key: str) -> Shard:
    """Attributes, sample range and position of a finished shard (reads the small ``sample`` coordinate only)."""
    import netCDF4

    path = run.result
    try:
        with netCDF4.Dataset(path) as nc:
            attrs = {k: nc.getncattr(k) for k in nc.ncattrs()}
            if "sample" not in nc.variables:
                raise DataError(f"{path}: no `sample` coordinate; not a sweep result")
            sample = np.asarray(nc.variables["sample"][:], dtype=np.int64)
            dims = tuple(nc.dimensions)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({err})") from None
    if sample.size == 0 or not np.array_equal(sample, np.arange(sample[0], sample[0] + sample.size)):
        raise DataError(f"{path}: its sample indices are not one contiguous range")
    recorded = str(attrs.get("sample_range", f"{sample[0]} {sample[-1] + 1}"))
    if recorded != f"{sample[0]} {sample[-1] + 1}":
        raise DataError(f"{path}: holds samples [{sample[0]}, {sample[-1] + 1}) but records sample_range {recorded}; "
                        "rerun that shard")
    if verify_checksum(path) is False:
        raise DataError(f"{path}: does not match its checksum record {checksum_path(path).name} (damaged or changed "
                        "since it was written); rerun that shard")
    match = _SHARD_ATTR.match(str(attrs.get("shard", "")))
    values = run.values()
    if match:
        index, count = int(match[1]), int(match[2])
    elif values.get(shard_key, "").isdigit():
        index, count = int(values[shard_key]), int(values.get(num_shards_key, "1"))
    else:
        index, count = 0, 1
    config = _flatten(yaml.load(str(attrs.get("config", "")), Loader=_Loader) or {})
    return Shard(run, index, count, int(sample[0]), int(sample[-1]) + 1, attrs, config, dims)


class MissingShards(DataError):
    """Shards of a cell are missing or unfinished: ``message`` names each and why; ``missing`` and ``runs`` let the
    caller say how to rerun them (the command line knows its own syntax, the library does not)."""

    def __init__(self, message: str, missing: list[int], runs: list[Run], shard_key: str) -> None:
        super().__init__(message)
        self.missing, self.runs, self.shard_key = missing, runs, shard_key


def _missing(label: str, missing: list[int], count: int, runs: list[Run], shard_key: str) -> MissingShards:
    """The refusal naming each missing shard and why it is missing."""
    by_index = {r.values().get(shard_key): r for r in runs if r.result is None}
    details = []
    for i in missing:
        run = by_index.get(str(i))
        if run is None:
            details.append(f"{i}: never ran")
        elif run.parts:
            details.append(f"{i}: unfinished, {run.parts} part(s) on disk in {run.directory}")
        else:
            details.append(f"{i}: no result in {run.directory}")
    message = f"{label}missing shard(s) {', '.join(map(str, missing))} of {count} ({'; '.join(details)})"
    return MissingShards(message, missing, runs, shard_key)


def _check_same(shards: list[Shard], label: str, skip: tuple[str, ...]) -> None:
    """Same resolved config except ``skip`` keys, and the same surrogate, in every shard."""
    ref = shards[0]
    for s in shards[1:]:
        for key in sorted(set(ref.config) | set(s.config)):
            if _under(key, skip):
                continue
            a, b = ref.config.get(key, "<absent>"), s.config.get(key, "<absent>")
            if a != b:
                raise DataError(f"{label}{s.path} is not a shard of the same sweep as {ref.path}: "
                                f"config `{key}` is {b!r} there, {a!r} here")
        if s.attrs.get("surrogate_hash") != ref.attrs.get("surrogate_hash"):
            raise DataError(f"{label}{s.path} was computed with another surrogate than {ref.path} "
                            f"(surrogate_hash {s.attrs.get('surrogate_hash')!r} != {ref.attrs.get('surrogate_hash')!r})")


def _check_product(plan: Plan) -> None:
    """Every combination of the swept values has a cell (a missing one never ran at all)."""
    have = {c.values for c in plan.cells}
    axes = plan.axes
    lacking = [" ".join(f"{k}={a[j]}" for k, a, j in zip(plan.keys, axes, index))
               for index in np.ndindex(*map(len, axes)) if tuple(a[j] for a, j in zip(axes, index)) not in have]
    if lacking:
        raise DataError(f"{plan.root}: the runs do not form the full product of the swept values; "
                        f"no run for {'; '.join(lacking)}")


# ----------------------------------------------------------------------------- combining


@contextmanager
def open_merged(plan: Plan, chunk: int | None = None) -> Iterator[xr.Dataset]:
    """The merged dataset, lazily (dask), chunked along ``sample`` in memory and for the disk.

    Parameters
    ----------
    plan
        From :func:`plan_merge`.
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
    parsed = [yaml.load(v, Loader=_Loader) if v else None for v in values]
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
    """Attributes a merge adds: shard count, summed non-finite counts, swept keys and cell configs."""
    shards = [s for c in plan.cells for s in c.shards]
    attrs: dict[str, str | int] = {
        "merged_shards": len(shards),
        "nonfinite_values": int(sum(int(s.attrs.get("nonfinite_values", 0)) for s in shards)),
        "nonfinite_jacobian": int(sum(int(s.attrs.get("nonfinite_jacobian", 0)) for s in shards)),
    }
    if "engine" in plan.reference.attrs:
        attrs["engine"] = str(plan.reference.attrs["engine"])
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
    config = yaml.load(str(plan.reference.attrs.get("config", "")), Loader=_Loader) or {}
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


# ----------------------------------------------------------------------------- helpers


def _under(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts and lists as ``{"a.b.0.c": leaf}``."""
    if isinstance(node, dict):
        items = [(str(k), v) for k, v in node.items()]
    elif isinstance(node, list):
        items = [(str(i), v) for i, v in enumerate(node)]
    else:
        return {prefix: node}
    flat: dict[str, Any] = {}
    for k, v in items:
        flat.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
    if not items and prefix:
        flat[prefix] = node
    return flat


def _label(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    """Message prefix naming a cell of a config sweep (``"grid.n=100 model=a: "``), empty for a plain sweep."""
    return " ".join(f"{k}={v}" for k, v in zip(keys, values)) + ": " if keys else ""


def _value_key(value: str) -> tuple:
    """Sort override values numerically when they are numbers, else as text."""
    parsed = yaml.load(value, Loader=_Loader) if value else None
    if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
        return (0, float(parsed), value)
    return (1, 0.0, value)


def _sort_key(values: tuple[str, ...]) -> tuple:
    return tuple(_value_key(v) for v in values)
