"""Pointwise linear propagation: ``sigma_y = sqrt(diag(J S J^T))`` at every point of a stored sweep.

:func:`pointwise_std` is the math on one block of Jacobians. :func:`pointwise_analysis` applies it to
every block of a stored sweep (:class:`sensitivity.sweep.stored.StoredSweep`), whose ``map_to`` streams the
result into a file: each block's Jacobians become the linear output standard deviations at every point,
written through the verified block store, without re-evaluating the model. Memory is one block of
Jacobians whatever the sweep size; a killed run resumes from its finished blocks; the result keeps
the model's own output dims (``time``, ``lat``/``lon`` or ``output``).
"""
from __future__ import annotations


import numpy as np

from sensitivity.analyses.propagation.dataset import input_variables
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.inputs.covariance import checked_covariance
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.sweep.stored import BlockAnalysis, StoredSweep

xr = lazy_import("xarray")


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
    _, chol = checked_covariance(input_cov, jac.shape[-1], "`input_cov`")
    return np.linalg.norm(jac @ chol, axis=-1)


def pointwise_analysis(sweep: StoredSweep, inputs: InputUncertainty) -> BlockAnalysis:
    """``output_std(sample, *out)`` = ``sqrt(diag(J S J^T))`` at every point of a sweep, as a block analysis for
    :meth:`~sensitivity.sweep.stored.StoredSweep.map_to` to stream into a file (memory: one block of Jacobians).

    Parameters
    ----------
    sweep
        A stored sweep with ``jacobian(sample, *out, parameter)`` [output units / parameter units] and
        ``x(sample, parameter)``; refused by ``map_to`` when it does not match its checksum record.
    inputs
        Input uncertainty; only its covariance ``S`` [units_i * units_j] is used (its mean is recorded).
        Its parameter names must be the sweep's, in any order.

    Returns
    -------
    BlockAnalysis
        Each block -> ``output_std`` [output units], ``x``, ``input_mean`` and ``input_covariance``.

    Raises
    ------
    DataError
        The sweep's parameter names (or units) are not the input uncertainty's.
    """
    order = parameter_order(sweep, inputs)
    covariance = input_variables(inputs)
    out_dims, name = sweep.output.dim_names, sweep.output.name
    return BlockAnalysis(lambda blk: _block_dataset(blk.data, name, out_dims, order, inputs, covariance),
                         variables=["x", "jacobian", name], name="pointwise propagation")


def parameter_order(sweep: StoredSweep, inputs: InputUncertainty) -> list[int]:
    """Where each of ``inputs``' parameters sits in the sweep; refuses other names or units.

    Raises
    ------
    DataError
        The sweep's parameter names (or units) are not the input uncertainty's.
    """
    stored = list(sweep.parameter_names)
    if sorted(stored) != sorted(inputs.names):
        raise DataError(f"{sweep.path}: the sweep's parameters {stored} are not the input uncertainty's "
                        f"{list(inputs.names)}")
    order = [stored.index(n) for n in inputs.names]
    if inputs.units is not None and sweep.parameter_units is not None:
        stored_units = [sweep.parameter_units[i] for i in order]
        if stored_units != list(inputs.units):
            raise DataError(f"{sweep.path}: the sweep's parameter units {stored_units} are not the input "
                            f"uncertainty's {list(inputs.units)}")
    return order


def _block_dataset(ds: xr.Dataset, values_name: str, out_dims: tuple[str, ...], order: list[int],
                   inputs: InputUncertainty, covariance: xr.Dataset) -> xr.Dataset:
    """One labeled block: ``output_std`` on the sweep's own dims, the points, the input covariance."""
    ds = ds.drop_indexes(list(ds.xindexes)).isel(parameter=order)  # parameters in the inputs' order
    ds = ds.assign_coords(parameter=ds["parameter"].copy(data=np.arange(ds.sizes["parameter"], dtype=np.int32)))
    jac = ds["jacobian"].transpose("sample", *out_dims, "parameter").values
    sigma = pointwise_std(jac, inputs.covariance)
    values = ds[values_name]
    units = {k: values.attrs[k] for k in ("units", "units_coordinate") if k in values.attrs}
    long_name = values.attrs.get("long_name", values_name)
    keep = {name: c for name, c in ds.coords.items() if name != "jacobian_units"}
    data = {
        "output_std": (("sample", *out_dims), sigma,
                       {"long_name": f"linear standard deviation of {long_name}: sqrt(diag(J S J^T))", **units}),
        "x": ds["x"],
    }
    on_parameter = [name for name, c in covariance.coords.items() if c.dims == ("parameter",)]
    return xr.Dataset(data, coords=keep).assign(covariance.drop_vars(on_parameter))
