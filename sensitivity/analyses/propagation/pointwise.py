"""Pointwise linear propagation: ``sigma_y = sqrt(diag(J S J^T))`` at every point of a stored sweep.

:func:`pointwise_std` is the math on one block of Jacobians. :func:`pointwise_propagation` reads the
Jacobians of a ``sweep.nc`` in blocks of samples (:func:`read_sweep`, the one place that reads the
sweep), turns each into the linear output standard deviations at every point and hands the block to a
:class:`~sensitivity.datasets.PartWriter`, without re-evaluating the model. Memory is one block of
Jacobians whatever the sweep size; a killed run resumes from its finished blocks; the result keeps
the model's own output dims (``time``, ``lat``/``lon`` or ``output``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np
import xarray as xr

from sensitivity.analyses.propagation.dataset import input_variables
from sensitivity.analyses.propagation.inputs import InputUncertainty, checked_covariance
from sensitivity.datasets import PartWriter, iter_blocks, open_result, output_spec_from
from sensitivity.errors import ConfigError, DataError

log = logging.getLogger(__name__)


def pointwise_std(jacobian: np.ndarray, input_cov: np.ndarray) -> np.ndarray:
    """Linear output standard deviations ``sqrt(diag(J S J^T))`` at every point of a sweep.

    Parameters
    ----------
    jacobian
        ``[N, m, n]`` (or ``[N, *out, n]``) Jacobians d output / d parameter
        [output units / parameter units].
    input_cov
        ``[n, n]`` symmetric positive definite input covariance [units_i * units_j].

    Returns
    -------
    ``[N, m]`` (or ``[N, *out]``) sigma_y [output units], the row norms of ``J L`` (``L L^T = S``), so
    never negative. Memory is one temporary the size of ``jacobian``: call it block by block on
    sweeps larger than memory.
    """
    jac = np.asarray(jacobian, dtype=float)
    if jac.ndim < 2:
        raise ConfigError(f"`jacobian` must have shape [N, m, n], got {list(jac.shape)}")
    chol = np.linalg.cholesky(checked_covariance(input_cov, jac.shape[-1], "input_cov"))
    return np.linalg.norm(jac @ chol, axis=-1)


def pointwise_propagation(
    sweep_path: str | Path,
    inputs: InputUncertainty,
    path: str | Path,
    *,
    attrs: Mapping[str, str],
    fingerprint: str,
    block: int = 16384,
    progress: bool = False,
) -> Path:
    """Write ``output_std(sample, *out)`` = ``sqrt(diag(J S J^T))`` for every point of a sweep to ``path``.

    Parameters
    ----------
    sweep_path
        A ``sweep.nc`` with ``jacobian(sample, *out, parameter)`` [output units / parameter units] and
        ``x(sample, parameter)``.
    inputs
        Input uncertainty; only its covariance ``S`` [units_i * units_j] is used (its mean is recorded).
        Its parameter names must be the sweep's, in any order.
    path
        Final netCDF file; parts go to ``<path>.parts/`` until every block is done.
    attrs
        Global attributes (provenance) of the final file.
    fingerprint
        Identity of the computation; parts of another computation are refused, not mixed.
    block
        Samples per block (and per part file).
    progress
        Show a progress bar.

    Returns
    -------
    Path
        ``path``, holding ``output_std`` [output units], ``x``, ``input_mean`` and ``input_covariance``.
    """
    from tqdm import tqdm

    layout, blocks = read_sweep(sweep_path, inputs, block)
    writer = PartWriter(path, fingerprint)
    done = writer.done()
    covariance = input_variables(inputs)
    with tqdm(total=layout.size, unit="pt", unit_scale=True, disable=not progress, desc="pointwise propagation") as bar:
        for start, ds in blocks:
            stop = start + ds.sizes["sample"]
            if (start, stop) not in done:
                writer.write(_block_dataset(ds, layout, inputs, covariance), start, stop)
            bar.update(stop - start)
    if done:
        log.info("resumed: %d blocks were already on disk", len(done))
    return writer.finalize(attrs)


@dataclass(frozen=True)
class SweepLayout:
    """What a sweep holds: its size, output dims, values variable, and where each input sits in it."""

    size: int
    out_dims: tuple[str, ...]
    values: str
    order: list[int]


def read_sweep(path: str | Path, inputs: InputUncertainty, block: int
               ) -> tuple[SweepLayout, Iterator[tuple[int, xr.Dataset]]]:
    """The layout of a sweep (checked against ``inputs``) and its ``(start, block)`` pairs of consecutive samples.

    The only code here that reads a stored sweep: its header once, then ``x``, ``jacobian`` and the
    values, ``block`` samples at a time (:func:`sensitivity.datasets.iter_blocks`).
    """
    names, units = inputs.names, inputs.units
    with open_result(path) as ds:
        if "jacobian" not in ds.data_vars or "x" not in ds.data_vars:
            raise DataError(f"{path}: not a sweep (needs `jacobian` and `x`), has {sorted(map(str, ds.data_vars))}")
        jac = ds["jacobian"]
        if jac.dims[0] != "sample" or jac.dims[-1] != "parameter":
            raise DataError(f"{path}: `jacobian` must be on (sample, ..., parameter), got {jac.dims}")
        out_dims = tuple(jac.dims[1:-1])
        values = output_spec_from(ds).name
        stored = [str(n) for n in ds["parameter_name"].values]
        if sorted(stored) != sorted(names):
            raise DataError(f"{path}: the sweep's parameters {stored} are not the input uncertainty's "
                            f"{list(names)}")
        order = [stored.index(n) for n in names]
        if units is not None and "parameter_units" in ds.coords:
            stored_units = [str(ds["parameter_units"].values[i]) for i in order]
            if stored_units != list(units):
                raise DataError(f"{path}: the sweep's parameter units {stored_units} are not the input "
                                f"uncertainty's {list(units)}")
        layout = SweepLayout(ds.sizes["sample"], out_dims, values, order)

    def blocks() -> Iterator[tuple[int, xr.Dataset]]:
        start = 0
        for part in iter_blocks(path, block, variables=["x", "jacobian", values]):
            yield start, part
            start += part.sizes["sample"]

    return layout, blocks()


def _block_dataset(ds: xr.Dataset, layout: SweepLayout, inputs: InputUncertainty,
                   covariance: xr.Dataset) -> xr.Dataset:
    """One labeled block: ``output_std`` on the sweep's own dims, the points, the input covariance."""
    ds = ds.drop_indexes(list(ds.xindexes)).isel(parameter=layout.order)  # parameters in the inputs' order
    ds = ds.assign_coords(parameter=ds["parameter"].copy(data=np.arange(ds.sizes["parameter"], dtype=np.int32)))
    jac = ds["jacobian"].transpose("sample", *layout.out_dims, "parameter").values
    sigma = pointwise_std(jac, inputs.covariance)
    values = ds[layout.values]
    units = {k: values.attrs[k] for k in ("units", "units_coordinate") if k in values.attrs}
    long_name = values.attrs.get("long_name", layout.values)
    keep = {name: c for name, c in ds.coords.items() if name != "jacobian_units"}
    data = {
        "output_std": (("sample", *layout.out_dims), sigma,
                       {"long_name": f"linear standard deviation of {long_name}: sqrt(diag(J S J^T))", **units}),
        "x": ds["x"],
    }
    on_parameter = [name for name, c in covariance.coords.items() if c.dims == ("parameter",)]
    return xr.Dataset(data, coords=keep).assign(covariance.drop_vars(on_parameter))
