"""Streaming a compiled Jacobian over a grid into a resumable, labeled dataset.

:func:`sweep` evaluates a :class:`~sensitivity.sweep.designs.Grid` (or one shard of it)
block by block through a :class:`~sensitivity.engine.jacobian.CompiledJacobian` and
hands every finished block to the verified record store (:class:`sensitivity.store.records.RecordStore`),
so memory is bounded by a few slices of a block whatever the grid size, a killed run resumes
where it stopped, and the final file appears only when every block is done and
checked. The engine writes each block's values and Jacobians straight into the
records of the file (``out=``), the store writes them in place and hashes them
as it writes: each byte is copied once out of TensorFlow, written once and
hashed once, and no step after the loop reads the data again. The store's
fingerprint adds to the caller's the grid's content, the shard's range, the part
layout and the engine (mode, dtype, chunk size, XLA).

An ensemble's sweep stores the members' mean values and Jacobians with the variables every study of an ensemble
carries (:func:`sensitivity.outputs.members.spread_variables`): each member's values ``<output>_member``, the
members' standard deviation of values and Jacobians ``<output>_surrogate_std``, ``jacobian_surrogate_std``, and the
values' surrogate interval ``<output>_combined_interval``. With ``store_members`` also each member's Jacobians on
the ``member`` dim (``K`` times the largest variable), what a per-member analysis of the stored sweep (the step map's
spread of steps, :mod:`sensitivity.analyses.calibration.step_map`) reads.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from pathlib import Path

import netCDF4
import numpy as np
import xarray as xr

from sensitivity import __version__
from sensitivity.outputs.members import COMBINED_INTERVAL, MEMBER, PER_MEMBER, SURROGATE_STD, member_coords, \
    spread_arrays, spread_variables
from sensitivity.datasets import sweep_dataset
from sensitivity.errors import ConfigError
from sensitivity.settings import check_points_per_part
from sensitivity.sweep.designs import Grid, shard_bounds
from sensitivity.store.parts import digest
from sensitivity.store.records import RecordStore, run_records

if TYPE_CHECKING:  # the engine imports TensorFlow: a sweep is handed an engine already built
    from sensitivity.engine.ensemble import CompiledEnsemble
    from sensitivity.engine.jacobian import CompiledJacobian

log = logging.getLogger(__name__)

#: Target size of one part file [bytes]; parts are whole multiples of the chunk size.
PART_BYTES = 64 * 2**20
#: Target size of one slice of a part [bytes] (whole chunks): what the engine fills while the slices before
#: it are hashed and written; a few such buffers instead of two parts' (64 MiB of fresh pages cost ~0.16 s
#: of kernel time on the development VM), and a slice stays in cache between the engine and the hash.
SLICE_BYTES = 8 * 2**20


@dataclass(frozen=True)
class SweepSummary:
    """What a sweep did: points, time until the file was published, non-finite counts and where it is."""

    path: Path
    points: int
    computed: int
    seconds: float
    nonfinite_values: int
    nonfinite_jacobian: int

    @property
    def jacobians_per_second(self) -> float:
        """Throughput of this run until its file was published [Jacobians s-1] (points computed now,
        excluding resumed ones)."""
        return self.computed / self.seconds if self.seconds > 0 else float("nan")


def point_bytes(jac: CompiledJacobian | CompiledEnsemble, store_members: bool = False) -> int:
    """Bytes a sweep by ``jac`` stores per point: the point, its values and Jacobians; for an ensemble of ``K``
    members beside them their std, the values' two interval ends and each member's values, and with
    ``store_members`` each member's Jacobians."""
    from sensitivity.engine.ensemble import CompiledEnsemble

    k = jac.members if isinstance(jac, CompiledEnsemble) else 0
    values = 1 + (3 + k if k else 0)
    jacobians = 1 + (1 + (k if store_members else 0) if k else 0)
    n_out, n_in = jac.surrogate.output_size, jac.surrogate.n_in
    return np.dtype(jac.dtype).itemsize * (n_in + n_out * (values + jacobians * n_in))


def part_points(jac: CompiledJacobian | CompiledEnsemble, requested: int | None = None,
                store_members: bool = False) -> int:
    """Points per part file: ``requested`` rounded up to whole chunks, or about :data:`PART_BYTES` of what the sweep
    stores (:func:`point_bytes`)."""
    if check_points_per_part(requested) is None:
        return _whole_chunks(jac, PART_BYTES, point_bytes(jac, store_members))
    return -(-int(requested) // jac.chunk_size) * jac.chunk_size



def _whole_chunks(jac: CompiledJacobian | CompiledEnsemble, size: int, per_point: int) -> int:
    """Points in about ``size`` bytes at ``per_point`` bytes each, in whole chunks (at least one)."""
    return max(1, -(-max(1, size // per_point) // jac.chunk_size)) * jac.chunk_size


def sweep(
    jac: CompiledJacobian | CompiledEnsemble,
    grid: Grid,
    path: str | Path,
    *,
    attrs: Mapping[str, str],
    fingerprint: str,
    shard: int = 0,
    num_shards: int = 1,
    points_per_part: int | None = None,
    parameter_long_names: list[str] | None = None,
    store_members: bool = False,
    level: float = 0.95,
    progress: bool = True,
) -> SweepSummary:
    """Compute values and Jacobians on shard ``shard`` of ``num_shards`` of ``grid`` and write them to ``path``.

    Parameters
    ----------
    jac
        The compiled engine; an ensemble's (:func:`~sensitivity.engine.ensemble.compile_ensemble`) gives the
        members' mean values and Jacobians, from one evaluation of every member, and beside each their standard
        deviation over the members (``ddof=1``), ``<output>_surrogate_std`` and ``jacobian_surrogate_std``: how much
        of each derivative is the surrogate's uncertainty; beside the values also each member's,
        ``<output>_member(sample, member, *out)``, and the surrogate's interval at ``level``,
        ``<output>_combined_interval(sample, *out, bound)`` (:mod:`sensitivity.outputs.members`).
    grid
        The design; its points must be in the surrogate's input order.
    path
        Final netCDF file; parts go to ``<path>.parts/`` until the end.
    attrs
        Global attributes (provenance) of the final file.
    fingerprint
        Identity of the computation as configured (model, space, grid settings); the grid's content, the
        layout and the engine are added here. Parts with another fingerprint are refused, not mixed.
    points_per_part
        Points per part file (rounded up to whole chunks); about 64 MiB of output when omitted.
    store_members
        Also store each member's Jacobians, ``jacobian_member(sample, member, *out, parameter)`` (an ensemble's
        engine only: ``K`` times the Jacobians).
    level
        Probability of an ensemble's ``<output>_combined_interval``, in (0, 1).
    progress
        Show a progress bar (points/s, ETA) that does not garble logging.
    """
    from sensitivity.engine.ensemble import CompiledEnsemble

    start, stop = shard_bounds(grid.size, shard, num_shards)
    ensemble = isinstance(jac, CompiledEnsemble)
    if store_members and not ensemble:
        raise ConfigError(f"`store_members` needs an ensemble surrogate (several members), and "
                          f"{jac.surrogate.source} is one model")
    step = part_points(jac, points_per_part, store_members)
    blocks = [(b, min(b + step, stop)) for b in range(start, stop, step)]
    key = digest(fingerprint, grid.digest(), [start, stop, step], jac.chunk_size, jac.mode, str(jac.dtype),
                 jac.jit_compile, jac.surrogate.content_hash, __version__, ensemble, bool(store_members))
    names, units = jac.surrogate.input_names, jac.surrogate.input_units
    output = jac.surrogate.output
    empty = np.empty((0, *output.shape), jac.dtype)
    template = sweep_dataset(np.arange(0), np.empty((0, len(names))), empty, empty[..., None].repeat(len(names), -1),
                             parameter_names=names, parameter_units=units,
                             parameter_long_names=parameter_long_names, output=output, grid_size=grid.size)
    if ensemble:
        template = with_ensemble_variables(template, output.name, jac.members, level, store_members)

    def fill(a: int, b: int, records: np.ndarray) -> None:
        points = grid.block(a, b)
        records["sample"], records["x"] = np.arange(a, b), points
        if not ensemble:
            jac(points, out=(records[output.name], records["jacobian"]))
            return
        values, jacobian = jac(points)  # every member's: [K, B, *out], [K, B, *out, n]
        records[output.name], records[output.name + SURROGATE_STD], records[output.name + COMBINED_INTERVAL] = \
            spread_arrays(values, level)
        records[output.name + PER_MEMBER] = np.moveaxis(values, 0, 1)  # sample first: [B, K, *out]
        records["jacobian"], records["jacobian" + SURROGATE_STD] = jacobian.mean(axis=0), jacobian.std(axis=0, ddof=1)
        if store_members:
            records["jacobian" + PER_MEMBER] = np.moveaxis(jacobian, 0, 1)

    def check(records: np.ndarray) -> dict[str, int]:  # in the writer thread, beside the next block's engine call
        values, jacobian = records[output.name], records["jacobian"]
        bad_values = _nonfinite(values)
        if bad_values:  # no derivative where the value itself is undefined (nor where a member's is)
            jacobian[~np.isfinite(values)] = np.nan
            if store_members:
                members = records[output.name + PER_MEMBER]
                records["jacobian" + PER_MEMBER][~np.isfinite(members)] = np.nan
        return {"nonfinite_values": bad_values, "nonfinite_jacobian": _nonfinite(jacobian)}

    t0 = time.perf_counter()
    attrs = {**attrs, "shard": f"{shard} of {num_shards}", "sample_range": f"{start} {stop}"}
    with RecordStore(path, key, (start, stop), template=template, attrs=attrs,
                     totals=("nonfinite_values", "nonfinite_jacobian")) as store:
        slice_size = _whole_chunks(jac, SLICE_BYTES, point_bytes(jac, store_members))
        computed = run_records(store, blocks, fill, check, slice_size=slice_size, progress=progress, desc="sweep")
        out = store.finalize()
    seconds = time.perf_counter() - t0  # until the file is published: the throughput a user gets
    with netCDF4.Dataset(out) as nc:
        bad_values, bad_jacobian = int(nc.nonfinite_values), int(nc.nonfinite_jacobian)
    if bad_values or bad_jacobian:
        log.warning("%s: %d non-finite values and %d non-finite Jacobian entries (kept as NaN/Inf, counted in "
                    "attributes nonfinite_values / nonfinite_jacobian)", out, bad_values, bad_jacobian)
    return SweepSummary(out, stop - start, computed, seconds, bad_values, bad_jacobian)


def with_ensemble_variables(template: xr.Dataset, output: str, k: int, level: float,
                            store_members: bool = False) -> xr.Dataset:
    """``template`` (a sweep's, empty) with the variables of ``k`` members beside its values and Jacobians, as
    :func:`sensitivity.outputs.members.spread_variables` writes them (on a ``member`` dim after ``sample``; the
    values are already the members' mean, so no ``_member_mean``): ``<output>_member``, ``<output>_surrogate_std``,
    ``<output>_combined_interval`` (at ``level``) and ``jacobian_surrogate_std``; with ``store_members`` also
    ``jacobian_member``."""
    template = template.assign_coords(member_coords(k))
    for name in (output, "jacobian"):
        var = template[name]
        spread = spread_variables(name, var, var.expand_dims({MEMBER: k}, axis=1), level)
        keep = [SURROGATE_STD] + ([PER_MEMBER, COMBINED_INTERVAL] if name == output else
                                  [PER_MEMBER] if store_members else [])
        template = template.assign({name + suffix: spread[name + suffix].astype(var.dtype) for suffix in keep})
    return template


def _nonfinite(a: np.ndarray) -> int:
    """How many entries of ``a`` are NaN or infinite: one summation when none is (any makes the sum
    non-finite), a count otherwise (or when finite values overflowed the sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(a.sum()):
            return 0
    return int(a.size - np.count_nonzero(np.isfinite(a)))
