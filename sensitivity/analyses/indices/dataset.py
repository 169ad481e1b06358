"""Labels and units of the index datasets: the ``parameter``, ``output`` and ``bound`` axes, derivative units.

Every variable carries ``long_name`` and ``units``; where no one units string covers a variable (its
entries differ along the output or parameter axis), ``units_coordinate`` names the coordinate that
holds them per entry, as the dataset contract says.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.outputs.labels import (axis_coords, common_units, flat_output_labels, output_coords, parameter_coords,
                                units_attrs)
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace
from sensitivity.units import product, quotient

xr = lazy_import("xarray")


def output_axis(m: int, names: Sequence[str] | None, units: Sequence[str] | None) -> dict[str, xr.Variable]:
    """Coordinates of the flat ``output`` axis; names default to ``y0 .. y{m-1}``."""
    names, units = flat_output_labels(m, names, units)
    return output_coords(names, units)


def parameter_axis(space: ParameterSpace) -> dict[str, xr.Variable]:
    """Coordinates of the ``parameter`` axis of ``space``."""
    return parameter_coords(space.names, space.units)


def __getattr__(name: str):
    """``BOUND_COORDS``: the coordinates of the ``bound`` axis (``low``, ``high``), built on first use (module
    ``__getattr__``, so that importing this module does not import xarray)."""
    if name == "BOUND_COORDS":
        return axis_coords("bound", ["low", "high"])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def derivative_units(output_units: Sequence[str] | None, parameter_units: Sequence[str]) -> str | None:
    """Units of d(output)/d(parameter) when one string covers every pair, else None."""
    out = common_units(output_units)
    par = common_units(parameter_units)
    return None if out is None or par is None else quotient(out, par)


def squared_units(units: Sequence[str] | None) -> list[str] | None:
    """Units of the square of each element (e.g. of a variance), None when unknown."""
    return None if units is None else [product(u, u) for u in units]


def derivative_table(
    output_units: Sequence[str] | None, parameter_units: Sequence[str], *, squared: bool = False
) -> np.ndarray | None:
    """``[m, n]`` units of d(output k)/d(parameter j) (squared with ``squared``), None when outputs have none."""
    if output_units is None:
        return None
    table = [[quotient(o, p) for p in parameter_units] for o in output_units]
    return np.array([[product(u, u) if squared else u for u in row] for row in table], dtype=object)


def units_table(
    name: str, dims: tuple[str, ...], table: Sequence | np.ndarray | None, long_name: str
) -> tuple[str | None, dict[str, xr.Variable]]:
    """One units string when every entry of ``table`` shares it, else a coordinate holding the table.

    Returns ``(units, coords)``: ``(units, {})`` for uniform units; ``(None, {name: table})``
    when they differ, for a variable whose ``units_coordinate`` attribute then names
    ``name`` (the dataset contract); ``(None, {})`` when ``table`` is None (units unknown).
    """
    if table is None:
        return None, {}
    array = np.asarray(table, dtype=object)
    if len(set(array.ravel())) == 1:
        return str(array.flat[0]), {}
    return None, {name: xr.Variable(dims, array, {"long_name": long_name})}


def variable(
    dims: tuple[str, ...],
    data: np.ndarray,
    long_name: str,
    units: str | None,
    *,
    units_coordinate: str | None = None,
    **attrs: object,
) -> xr.Variable:
    """A labeled variable with ``long_name`` and, when known, ``units``.

    Where the units differ along the output or parameter axis (no one string covers
    them) the ``units`` attribute is left out and ``units_coordinate`` names the
    coordinate holding them per entry (e.g. ``parameter_units``, ``nu_units``); without
    such a coordinate a ``units_note`` says the units are mixed.
    """
    meta: dict[str, object] = {"long_name": long_name, **units_attrs(units, units_coordinate)}
    if len(meta) == 1:
        meta["units_note"] = "units differ along the output/parameter axes: see output_units and parameter_units"
    meta.update(attrs)
    return xr.Variable(dims, data, meta)


def rename_axis(ds: xr.Dataset, old: str, new: str) -> xr.Dataset:
    """Rename a labeled axis and its ``_name``/``_units`` coordinates (``output`` -> ``quantity``)."""
    names = {k: new + k[len(old):] for k in list(ds.variables) if k == old or k in (f"{old}_name", f"{old}_units")}
    return ds.rename(names)
