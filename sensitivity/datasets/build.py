"""Labeled datasets built from arrays: the samples' and the sweep's layout, Jacobian units, a stored output's description.

Integer index dims with names as non-dimension coordinates (:mod:`sensitivity.outputs.labels`), the model's
own output dims (:mod:`sensitivity.outputs.axes`), ``long_name`` and ``units`` on every variable.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sensitivity.errors import DataError
from sensitivity.outputs.labels import parameter_coords, units_attrs
from sensitivity.outputs.members import COMBINED_INTERVAL, MEMBER_MEAN, PER_MEMBER, SURROGATE_STD
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.axes import own_coords
from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.units import quotient

xr = lazy_import("xarray")


def jacobian_units(spec: OutputSpec, parameter_units: Sequence[str]) -> tuple[str | None, np.ndarray]:
    """Units of d output / d parameter: one string when they are uniform, and the full table.

    Returns ``(uniform units or None, units array over (the labels of spec.units_dim?, parameter))``.
    """
    out_units = list(spec.units) if spec.units_dim is not None else [spec.units]
    table = np.array([[quotient(o, p) for p in parameter_units] for o in out_units], dtype=object)
    uniform = table.flat[0] if np.all(table == table.flat[0]) else None
    return uniform, table


def samples_dataset(
    sample: np.ndarray,
    points: np.ndarray,
    values: np.ndarray,
    *,
    parameter_names: Sequence[str],
    parameter_units: Sequence[str],
    parameter_long_names: Sequence[str] | None,
    output: OutputSpec,
    grid_size: int | None = None,
) -> xr.Dataset:
    """Label samples of a model (or a simulator): ``x(sample, parameter)`` and ``y(sample, *out)`` on the model's
    own output dims and labeled parameters, the sweep's layout without its Jacobian.

    Parameters
    ----------
    sample
        Global indices of the points in the grid.
    points, values
        ``[N, n]``, ``[N, *out]`` arrays in physical units.
    grid_size
        Size of the whole grid: the ``sample`` index is int32 (CF 1.8 has no int64) when it fits,
        float64 (exact to 2^53) beyond.
    """
    coords: dict[str, Any] = {
        "sample": xr.Variable("sample", np.asarray(sample, dtype=sample_dtype(grid_size or len(sample))), {"long_name": "index of the point in the grid", "units": "1"}),
        **parameter_coords(parameter_names, parameter_units),
        **own_coords(output),
    }
    if parameter_long_names:
        coords["parameter_long_name"] = xr.Variable("parameter", np.asarray(parameter_long_names, dtype=object), {"long_name": "parameter description"})
    data = {
        "x": (("sample", "parameter"), points, {"long_name": "parameter value at the point",
                                                 **units_attrs(parameter_units, "parameter_units")}),
        output.name: (("sample", *output.dim_names), values, {"long_name": output.long_name,
                                                              **units_attrs(output.units, _units_coordinate(output))}),
    }
    return xr.Dataset(data, coords=coords)


def sweep_dataset(
    sample: np.ndarray,
    points: np.ndarray,
    values: np.ndarray,
    jacobian: np.ndarray,
    *,
    parameter_names: Sequence[str],
    parameter_units: Sequence[str],
    parameter_long_names: Sequence[str] | None,
    output: OutputSpec,
    grid_size: int | None = None,
) -> xr.Dataset:
    """Label one block of a sweep: ``x(sample, parameter)``, ``y(sample, *out)``, ``jacobian(sample, *out, parameter)``
    (:func:`samples_dataset` and the Jacobian).

    Parameters
    ----------
    sample
        Global indices of the points in the grid.
    points, values, jacobian
        ``[N, n]``, ``[N, *out]``, ``[N, *out, n]`` arrays in physical units.
    grid_size
        Size of the whole grid: the ``sample`` index is int32 (CF 1.8 has no int64) when it fits,
        float64 (exact to 2^53) beyond.
    """
    ds = samples_dataset(sample, points, values, parameter_names=parameter_names, parameter_units=parameter_units,
                         parameter_long_names=parameter_long_names, output=output, grid_size=grid_size)
    uniform, table = jacobian_units(output, parameter_units)
    ds["jacobian"] = (("sample", *output.dim_names, "parameter"), jacobian,
                      {"long_name": f"derivative of {output.long_name} with respect to the parameter",
                       **units_attrs(uniform, "jacobian_units")})
    if uniform is None:
        dims = (output.units_dim.name, "parameter") if table.shape[0] > 1 else ("parameter",)
        ds = ds.assign_coords(jacobian_units=(dims, table if table.shape[0] > 1 else table[0], {"long_name": "units of the jacobian"}))
    return ds


def _units_coordinate(spec: OutputSpec) -> str | None:
    """The coordinate holding per-label units (``species_units``), None when one unit covers every output."""
    return None if spec.units_dim is None else f"{spec.units_dim.name}_units"



def sample_dtype(grid_size: int) -> type:
    """int32 for grids that fit it (CF 1.8 allows no int64), else float64."""
    return np.int32 if grid_size < 2**31 else np.float64


def output_spec_from(ds: xr.Dataset, exclude: Sequence[str] = ("x", "jacobian")) -> OutputSpec:
    """The :class:`OutputSpec` of a sweep-like result, read back from its output variable and coordinates.

    The output variable is the data variable on ``sample`` not named in ``exclude`` (nor an ensemble's
    ``<variable>_member``, ``_surrogate_std`` or ``_combined_interval`` beside another variable,
    :func:`sensitivity.outputs.members.spread_variables`); its dims after ``sample`` are the
    output dims (inverse of :func:`sensitivity.outputs.axes.own_coords`): a dim with a ``<dim>_name`` coordinate is
    labeled, any other is numeric.
    """
    beside = {n + suffix for n in ds.data_vars for suffix in (PER_MEMBER, MEMBER_MEAN, SURROGATE_STD,
                                                                 COMBINED_INTERVAL)}
    candidates = [n for n, v in ds.data_vars.items()
                  if n not in exclude and n not in beside and v.dims[:1] == ("sample",)]
    if len(candidates) != 1:
        raise DataError(f"cannot tell the output variable of the dataset: candidates {candidates}")
    var = ds[candidates[0]]
    dims, units = [], var.attrs.get("units")
    for dim in var.dims[1:]:
        if f"{dim}_name" in ds.coords:
            labels = ds[f"{dim}_name"]
            described = labels.attrs.get("long_name", "")
            dims.append(OutputDim(dim, tuple(str(v) for v in labels.values),
                                  long_name="" if described == f"{dim} name" else described))
            if units is None and f"{dim}_units" in ds.coords:
                units = tuple(str(u) for u in ds[f"{dim}_units"].values)
        else:
            coord = ds[dim]
            dims.append(OutputDim(dim, tuple(coord.values.tolist()), coord.attrs.get("units", "1"),
                                  coord.attrs.get("long_name", "")))
    if units is None:
        raise DataError(f"the output variable `{var.name}` has no `units` attribute and no per-label units coordinate")
    return OutputSpec(name=str(var.name), units=units, dims=tuple(dims), long_name=var.attrs.get("long_name", ""))


def flat_sweep_block(block: xr.Dataset, spec: OutputSpec, members: bool = False,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points ``[N, n]``, values ``[N, m]`` and Jacobians ``[N, m, n]`` of a sweep block, outputs flat in C order;
    with ``members``, each member's (``<output>_member``, ``jacobian_member``): ``[N, K, m]`` and ``[N, K, m, n]``."""
    lead = ("sample", "member") if members else ("sample",)
    suffix = PER_MEMBER if members else ""
    shape = tuple(block.sizes[d] for d in lead)
    out = list(spec.dim_names)
    values = block[spec.name + suffix].transpose(*lead, *out).values.reshape(*shape, spec.size)
    jacobian = block["jacobian" + suffix].transpose(*lead, *out, "parameter").values.reshape(*shape, spec.size, -1)
    return block["x"].transpose("sample", "parameter").values, values, jacobian


def index_string_dims(ds: xr.Dataset) -> xr.Dataset:
    """Replace every string *dimension* coordinate (e.g. ``bound = ["low", "high"]``) by an integer index
    with the strings as ``<dim>_name``, the layout netCDF and the CF checker accept (see :mod:`sensitivity.outputs.labels`)."""
    from sensitivity.outputs.labels import axis_coords

    for dim in [d for d in ds.dims if d in ds.coords and ds[d].dtype.kind in "OUS"]:
        names = [str(v) for v in ds[dim].values]
        ds = ds.drop_vars(dim).assign_coords(axis_coords(dim, names))
    return ds
