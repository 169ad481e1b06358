"""Streaming a stored sweep through any analysis: the header read once, the samples block by block.

A ``sweep.nc`` (or a merged one) holds ``x(sample, parameter)``, the model's output on its own dims
and ``jacobian(sample, *out, parameter)``. Analyses of a stored sweep — the Gauss-Newton step map,
pointwise (local) propagation, DGSM from a sweep — need its header (names, units, output spec,
sample range, provenance) once and then its samples in bounded-memory blocks; those that write a
per-sample result do it through the same verified, resumable block store as the sweep itself.

API (the one way to read a stored sweep)::

    from sensitivity.sweep.stored import StoredSweep

    with StoredSweep(path) as sweep:               # opens the file, reads and checks the header once
        sweep.parameter_names, sweep.parameter_units   # tuple[str, ...], stored order
        sweep.output                               # OutputSpec: name, units, dims with coordinates
        sweep.size, sweep.sample_range             # samples in the file; [start, stop) of the grid they are
        sweep.members, sweep.surrogate_std        # an ensemble's: members' Jacobians stored (store_members; else 0), std?
        sweep.surrogate_hash, sweep.attrs          # provenance (global attributes)
        sweep.content_hash()                       # sha256 of the file, for a consumer's fingerprint
        for blk in sweep.blocks(65536, variables=["x", "jacobian"]):    # consecutive, loaded one at a time
            blk.start, blk.stop, blk.data          # positions [start, stop) in the file, an xr.Dataset
            x, values, jac = blk.flat(sweep.output)    # [b, n], [b, m], [b, m, n]; outputs flat in C order
            x, values, jac = blk.flat(sweep.output, members=True)  # [b, n], [b, K, m], [b, K, m, n]
        sweep.map_to(out_path, BlockAnalysis(dataset_of), fingerprint=key,   # a resumable, verified
                     attrs=provenance, block=16384)                           # per-sample result

``map_to`` first checks the file against its checksum record (``sweep.nc.sha256``, :meth:`StoredSweep.verify`;
a consumer reading ``blocks()`` calls it itself) when there is one,
then runs :func:`sensitivity.store.parts.run_blocks` over the file's blocks into a
:class:`~sensitivity.store.parts.PartStore` spanning ``[0, size)``: the fingerprint given is extended with
the sweep's content hash and the block size, parts are checked on resume and at assembly, and the
result appears atomically only when every block is done. Coordinates are read as stored
(``decode_times=False``), so a ``days since <epoch>`` axis stays the model's numbers.

A sweep written by :func:`sensitivity.sweep.stream.sweep` is a netCDF classic file whose record dimension is
``sample`` (:mod:`sensitivity.store.record_file`): a block of samples is one byte range, which
:meth:`StoredSweep.blocks` copies straight from the memory-mapped file into native arrays (the
netCDF library reads such variables record by record, ~4x slower on a 2^18-point demo sweep);
variables whose stored and decoded values differ (scaled, masked integers) still go through xarray.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from sensitivity.datasets import (ENCODING_ENGINE, by_name, checksum_path, content_hash, flat_sweep_block,
                                  output_spec_from, verify_checksum)
from sensitivity.outputs.members import PER_MEMBER, SURROGATE_STD
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.spec import OutputSpec
from sensitivity.store.record_file import memory_map
from sensitivity.store.parts import PartStore, digest, run_blocks

xr = lazy_import("xarray")


@dataclass(frozen=True)
class SweepBlock:
    """Samples ``[start, stop)`` (positions in the file) of a stored sweep, loaded."""

    start: int
    stop: int
    data: xr.Dataset

    def flat(self, spec: OutputSpec, members: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Points ``[b, n]``, values ``[b, m]`` and Jacobians ``[b, m, n]``, outputs flat in C order; with
        ``members`` each member's values ``[b, K, m]`` and Jacobians ``[b, K, m, n]`` (a sweep with
        :attr:`StoredSweep.members`)."""
        return flat_sweep_block(self.data, spec, members)


@dataclass(frozen=True)
class BlockAnalysis:
    """An analysis of a stored sweep block by block, as :meth:`StoredSweep.map_to` runs it.

    Attributes
    ----------
    compute
        One block of the sweep -> the labeled result of its samples (``sample`` first).
    variables
        The sweep's variables it reads (None: all).
    name
        What it is (the progress bar's label).
    """

    compute: Callable[[SweepBlock], xr.Dataset]
    variables: Sequence[str] | None = None
    name: str = ""


class StoredSweep:
    """A sweep file opened for streaming: header attributes, then :meth:`blocks` or :meth:`map_to`.

    Parameters
    ----------
    path
        A ``sweep.nc`` (or merged file) with ``x(sample, parameter)`` and ``jacobian(sample, *out,
        parameter)``, ``parameter_name``/``parameter_units`` coordinates and one output variable.

    Raises
    ------
    DataError
        Missing file, or not a sweep (variables, dims or labels missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._hash: str | None = None
        self._records: np.ndarray | None = None
        if not self.path.is_file():
            raise DataError(f"sweep file not found: {self.path}")
        try:
            self._ds = by_name(xr.open_dataset(self.path, engine=ENCODING_ENGINE, decode_times=False))
        except (OSError, ValueError) as e:
            raise DataError(f"{self.path}: cannot read it as netCDF ({e})") from None
        try:
            self._read_header()
            self._records = memory_map(self.path)
        except BaseException:
            self.close()
            raise

    def _read_header(self) -> None:
        ds = self._ds
        missing = [v for v in ("x", "jacobian") if v not in ds.data_vars]
        if missing or "parameter_name" not in ds.coords:
            raise DataError(f"{self.path}: not a sweep (needs `x`, `jacobian` and `parameter_name`), has "
                            f"{sorted(map(str, ds.variables))}")
        jac = ds["jacobian"]
        if jac.dims[0] != "sample" or jac.dims[-1] != "parameter":
            raise DataError(f"{self.path}: `jacobian` must be on (sample, ..., parameter), got {jac.dims}")
        self.output: OutputSpec = output_spec_from(ds)
        self.parameter_names = tuple(str(n) for n in ds["parameter_name"].values)
        self.parameter_units = (tuple(str(u) for u in ds["parameter_units"].values)
                                if "parameter_units" in ds.coords else None)
        self.size = int(ds.sizes["sample"])
        #: Members whose Jacobians (and values) the sweep stores (``store_members``), 0 when it stores none.
        self.members = int(ds.sizes["member"]) if "jacobian" + PER_MEMBER in ds.data_vars else 0
        #: Whether it stores the members' standard deviation of the Jacobian (an ensemble's sweep).
        self.surrogate_std = "jacobian" + SURROGATE_STD in ds.data_vars
        self.attrs: dict[str, Any] = dict(ds.attrs)
        self.surrogate_hash: str | None = self.attrs.get("surrogate_hash")
        recorded = str(self.attrs.get("sample_range", f"0 {self.size}")).split()
        self.sample_range = (int(recorded[0]), int(recorded[1])) if len(recorded) == 2 else (0, self.size)

    def __enter__(self) -> StoredSweep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._records = None
        self._ds.close()

    def content_hash(self) -> str:
        """SHA-256 of the file's bytes (``sha256:<hex>``), computed on first use."""
        if self._hash is None:
            self._hash = content_hash(self.path)
        return self._hash

    def verify(self) -> None:
        """Refuse a file that does not match its checksum record (``sweep.nc.sha256``), when it has one.

        Raises
        ------
        DataError
            The file was damaged or changed since it was written.
        """
        if verify_checksum(self.path, self.content_hash()) is False:
            raise DataError(f"{self.path}: does not match its checksum record {checksum_path(self.path).name} "
                            "(damaged or changed since it was written); rerun the sweep")

    def blocks(self, block: int = 65536, variables: Sequence[str] | None = None,
               start: int = 0, stop: int | None = None) -> Iterator[SweepBlock]:
        """Consecutive blocks of ``block`` samples of positions ``[start, stop)``, loaded one at a time."""
        if not isinstance(block, (int, np.integer)) or block < 1:
            raise DataError(f"block must be an integer >= 1, got {block!r}")
        ds = self._ds if variables is None else self._ds[list(variables)]
        stop = self.size if stop is None else stop
        for a in range(start, stop, block):
            b = min(a + block, stop)
            yield SweepBlock(a, b, self._load(ds, a, b))

    def _load(self, ds: xr.Dataset, a: int, b: int) -> xr.Dataset:
        """Samples ``[a, b)`` of ``ds`` in memory: record variables copied from the mapped records of a
        record file (one copy, into native byte order) where that is what xarray would decode, the rest
        read through xarray."""
        part = ds.isel(sample=slice(a, b))
        if self._records is not None:
            records = self._records[a:b]
            native = {name: records[name].astype(records.dtype[name].base.newbyteorder("="))
                      for name in records.dtype.names if name in part.variables and _as_stored(part[name])}
            direct = {name: part[name].variable.copy(data=data) for name, data in native.items()}
            part = part.assign_coords({k: v for k, v in direct.items() if k in part.coords}).assign(
                {k: v for k, v in direct.items() if k in part.data_vars})
        return part.load()

    def map_to(self, path: str | Path, analysis: BlockAnalysis, *, fingerprint: str, attrs: Mapping[str, Any],
               block: int = 16384, progress: bool = False) -> Path:
        """Write ``analysis`` of every block of the sweep to ``path`` through the verified store (memory: one block;
        a killed run resumes from its finished blocks).

        Parameters
        ----------
        path
            The result file; parts in ``<path>.parts/`` until every block is done.
        analysis
            What each block becomes (:class:`BlockAnalysis`).
        fingerprint
            Identity of the analysis (its settings and other inputs' hashes); the sweep's content hash
            and ``block`` are added, so a changed sweep or block size never mixes with old parts.
        attrs
            Global attributes (provenance) of the result.
        block
            Sweep points per block (and per part file).
        """
        if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
            raise ConfigError(f"`block` must be an integer >= 1, got {block!r}")
        self.verify()
        variables = analysis.variables
        key = digest(fingerprint, self.content_hash(), int(block), list(variables or []))
        blocks = [(a, min(a + block, self.size)) for a in range(0, self.size, block)]
        ds = self._ds if variables is None else self._ds[list(variables)]

        def one(a: int, b: int) -> xr.Dataset:
            return analysis.compute(SweepBlock(a, b, self._load(ds, a, b)))

        with PartStore(path, key, span=(0, self.size)) as store:
            run_blocks(store, blocks, one, progress=progress, desc=analysis.name)
            return store.finalize(attrs)


def _as_stored(var: xr.DataArray) -> bool:
    """Whether xarray decodes ``var`` to its stored values (no scaling; no fill value, or a NaN one of a float)."""
    encoding = var.encoding
    fill = encoding.get("_FillValue", encoding.get("missing_value"))
    return (not {"scale_factor", "add_offset"} & encoding.keys()
            and np.dtype(encoding.get("dtype", var.dtype)) == var.dtype
            and (fill is None or (var.dtype.kind == "f" and bool(np.isnan(fill)))))
