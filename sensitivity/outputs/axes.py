"""The model's own output dims in a dataset, and the one flat axis analyses stack them into.

Every dataset keeps a model's outputs on its own dims (:mod:`sensitivity.outputs.spec` states the
contract): ``new_infections(sample, day)``, ``S1(parameter, species, day)``. An analysis that
needs one flat axis of ``m`` outputs (a least-squares fit, an output covariance) works on
``output`` in C order, labeled by :func:`flat_coords`, and hands its dataset to
:func:`unstack_output`, which puts every variable on ``output`` back on the model's dims and gives
the square-matrix axes ``output_i``/``output_j`` the coordinates of each of the model's dims
(``day_i(output_i)``, ``species_i(output_i)``), so a covariance of a ``(species, day)`` output is
read without reshaping rules of one's own.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sensitivity.errors import DataError
from sensitivity.outputs.labels import axis_coords
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.spec import FLAT, OutputDim, OutputSpec

xr = lazy_import("xarray")

#: The two axes of an output-by-output matrix (a covariance), with the suffix of their per-dim coordinates.
MATRIX_AXES = {"output_i": "_i", "output_j": "_j"}


def own_coords(spec: OutputSpec) -> dict[str, xr.Variable]:
    """Coordinates of the model's own output dims.

    A labeled dim ``d`` is an integer index ``d`` with its labels in ``d_name`` (and its per-label
    units in ``d_units`` when ``spec.units`` is a list); a numeric dim is a dimension coordinate with
    its units and long_name (``standard_name`` for latitude, longitude and CF time axes).
    """
    coords: dict[str, xr.Variable] = {}
    for d in spec.dims:
        if d.is_labels:
            units = list(spec.units) if spec.units_dim == d else None
            labeled = axis_coords(d.name, [str(v) for v in d.values], units)
            if d.long_name:
                labeled[f"{d.name}_name"].attrs["long_name"] = d.long_name
            coords.update(labeled)
        else:
            coords[d.name] = _numeric_coord(d, d.name)
    return coords


def _numeric_coord(d: OutputDim, dim: str) -> xr.Variable:
    attrs = {"long_name": d.long_name or d.name, "units": d.units}
    if d.name in ("lat", "latitude"):
        attrs.update(standard_name="latitude", units=d.units if d.units != "1" else "degrees_north")
    elif d.name in ("lon", "longitude"):
        attrs.update(standard_name="longitude", units=d.units if d.units != "1" else "degrees_east")
    elif " since " in d.units:  # a CF time axis: "<unit> since <epoch>"
        attrs.update(standard_name="time", axis="T", calendar="standard")
    values = np.asarray(d.values)
    if np.issubdtype(values.dtype, np.integer):  # CF 1.8 has no int64
        values = values.astype(np.int32 if np.abs(values).max() < 2**31 else np.float64)
    return xr.Variable(dim, values, attrs)


def flat_coords(spec: OutputSpec, axis: str = FLAT) -> dict[str, xr.Variable]:
    """Coordinates of a flat ``axis`` over the model's outputs (C order).

    ``axis`` (0..m-1), ``{axis}_name`` (a readable label per output, e.g. ``y[species=prey,day=3]``)
    and ``{axis}_units``; beside them, for a model of several dims or of a labeled dim other than
    ``output``, each dim's value along the axis: ``day(output)``, ``species(output)`` (its labels),
    or ``day_i(output_i)`` on a matrix axis.
    """
    coords = axis_coords(axis, spec.flat_names(), spec.flat_units())
    if spec.is_flat:
        return coords
    suffix = MATRIX_AXES.get(axis, "")
    grids = np.meshgrid(*[np.arange(d.size) for d in spec.dims], indexing="ij")
    for d, index in zip(spec.dims, grids):
        if d.is_labels:
            values, attrs = np.asarray(d.values, dtype=object), {"long_name": f"{d.long_name or d.name} label"}
        else:
            own = _numeric_coord(d, d.name)
            values, attrs = own.values, dict(own.attrs)
        coords[f"{d.name}{suffix}"] = xr.Variable(axis, values[index.ravel()], attrs)
    return coords


def unstack_output(ds: xr.Dataset, spec: OutputSpec) -> xr.Dataset:
    """Every variable on the flat ``output`` axis put back on the model's own dims, which go last.

    The model's dims take the place of ``output`` and are then moved to the end of each variable (CF
    recommends other dims to the left of time and space: ``S1_interval(parameter, bound, day)``).
    A non-label coordinate along ``output`` is reshaped too, or dropped to a scalar when it is the
    same for every output (a units table shared by all outputs). The matrix axes ``output_i`` and
    ``output_j`` stay flat and gain each dim's coordinates (:func:`flat_coords`). A model whose dims
    are the flat axis already (named scalars) is left as it is, matrix coordinates included.

    Raises
    ------
    DataError
        When ``ds`` has an ``output`` axis of another length than the model's outputs.
    """
    if spec.is_flat:
        return ds
    for axis in [a for a in MATRIX_AXES if a in ds.dims]:
        ds = ds.assign_coords({k: v for k, v in flat_coords(spec, axis).items() if k not in ds.coords})
    if FLAT not in ds.dims:
        return ds
    if ds.sizes[FLAT] != spec.size:
        raise DataError(f"unstack_output: need an `output` axis of {spec.size} entries (the model's "
                        f"{dict(zip(spec.dim_names, spec.shape))}), got {ds.sizes[FLAT]}")
    labels = set(flat_coords(spec)) | {f"{FLAT}_name", f"{FLAT}_units"}
    reshaped: dict[str, Any] = {}
    constant: dict[str, Any] = {}
    for name, var in ds.variables.items():
        if FLAT not in var.dims or name in labels:
            continue
        if name in ds.coords and _constant_along(var):
            constant[name] = var.isel({FLAT: 0})
            continue
        pos = var.dims.index(FLAT)
        dims = var.dims[:pos] + spec.dim_names + var.dims[pos + 1:]
        values = var.values.reshape(var.shape[:pos] + spec.shape + var.shape[pos + 1:])
        reshaped[name] = xr.Variable(dims, values, var.attrs, var.encoding)
    data = {k: v for k, v in reshaped.items() if k in ds.data_vars}
    coords = {k: v for k, v in reshaped.items() if k not in data}
    out = ds.drop_vars([k for k, v in ds.variables.items() if FLAT in v.dims]).drop_dims(FLAT, errors="ignore")
    out = out.assign_coords({**own_coords(spec), **coords, **constant}).assign(data)
    return out.transpose(..., *spec.dim_names)


def _constant_along(var: xr.Variable) -> bool:
    first = var.isel({FLAT: [0]}).values
    return bool((var.values == first).all())
