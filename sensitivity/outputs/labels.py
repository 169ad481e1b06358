"""Labeled coordinates shared by every dataset (parameters, flat outputs, square matrices) and their units.

netCDF and the CF checker reject string *dimension* coordinates, so every labeled
axis is an integer index dimension with the names (and units) carried as
non-dimension coordinates, e.g. ``parameter_name(parameter)``. Use
:func:`sensitivity.datasets.by_name` (or ``ds.set_xindex("parameter_name")``) to
select by name.

Every dataset writer gives its variables' units through :func:`units_attrs` (the dataset contract's
rule: a variable gets ``units``, or, where units differ per entry, ``units_coordinate`` naming the
coordinate that holds them; :func:`axis_units_attrs` for a labeled axis) and the units of a sum of
squared residuals through :func:`cost_units`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.units import instant_text, product

xr = lazy_import("xarray")


def axis_coords(axis: str, names: Sequence[str], units: Sequence[str] | None = None) -> dict[str, xr.Variable]:
    """Coordinates of one labeled axis: ``axis`` (0..n-1), ``{axis}_name`` and optionally ``{axis}_units``.

    Parameters
    ----------
    axis
        Dimension name, e.g. ``"parameter"``, ``"output"``, ``"parameter_i"``.
    names
        One label per position.
    units
        Optional UDUNITS-2 string per position.
    """
    n = len(names)
    coords = {
        axis: xr.Variable(axis, np.arange(n, dtype=np.int32), {"long_name": f"{axis} index", "units": "1"}),
        f"{axis}_name": xr.Variable(axis, np.asarray(names, dtype=object), {"long_name": f"{axis} name"}),
    }
    if units is not None:
        coords[f"{axis}_units"] = xr.Variable(axis, np.asarray(units, dtype=object), {"long_name": f"{axis} units"})
    return coords


def parameter_coords(names: Sequence[str], units: Sequence[str] | None = None) -> dict[str, xr.Variable]:
    """Coordinates of the ``parameter`` axis."""
    return axis_coords("parameter", names, units)


def flat_output_labels(m: int, names: Sequence[str] | None,
                       units: Sequence[str] | None) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Names (default ``y0 .. y{m-1}``) and UDUNITS-2 units (default None: unknown) of ``m`` flat outputs.

    Raises
    ------
    ConfigError
        When ``names`` or ``units`` does not have ``m`` entries.
    """
    names = tuple(f"y{k}" for k in range(m)) if names is None else tuple(names)
    for what, labels in (("output_names", names), ("output_units", units)):
        if labels is not None and len(labels) != m:
            raise ConfigError(f"`{what}` must have {m} entries (the model's outputs), got {len(labels)}")
    return names, None if units is None else tuple(units)


def output_coords(names: Sequence[str], units: Sequence[str] | None = None) -> dict[str, xr.Variable]:
    """Coordinates of a flat ``output`` axis."""
    return axis_coords("output", names, units)


def matrix_coords(axis: str, names: Sequence[str], units: Sequence[str] | None = None) -> dict[str, xr.Variable]:
    """Coordinates of a square matrix over ``axis``: dims ``{axis}_i`` and ``{axis}_j``."""
    return {**axis_coords(f"{axis}_i", names, units), **axis_coords(f"{axis}_j", names, units)}


def common_units(units: str | Sequence[str] | None) -> str | None:
    """The one unit every entry has (``units`` itself for a string), None when they differ or are unknown."""
    if units is None or isinstance(units, str):
        return units
    return str(units[0]) if len(units) and len(set(units)) == 1 else None


def units_attrs(units: str | Sequence[str] | None, coordinate: str | None = None, *,
                squared: bool = False) -> dict[str, str]:
    """CF units attributes of a variable: ``units``, or ``units_coordinate`` where the entries differ.

    Parameters
    ----------
    units
        One unit for every entry (a string), the unit of each entry along a labeled axis (a
        sequence, e.g. ``parameter_units``), or None (unknown, or known to differ).
    coordinate
        The coordinate holding the units per entry (e.g. ``"parameter_units"``), named by
        ``units_coordinate`` when no single unit covers the entries; None: there is none.
    squared
        Units of the square (a variance, a covariance entry (i, i)): ``u2`` for ``u``. Where the
        entries differ, the units of entry ``(i, j)`` are the product of entries ``i`` and ``j``.

    Returns
    -------
    dict
        ``{"units": u}``, ``{"units_coordinate": coordinate}`` or ``{}`` (no units known).

    Examples
    --------
    >>> units_attrs(["m", "m"], "parameter_units", squared=True)
    {'units': 'm2'}
    >>> units_attrs(["m", "s"], "parameter_units")
    {'units_coordinate': 'parameter_units'}
    """
    one = common_units(units)
    if one is not None:
        return {"units": product(one, one) if squared else one}
    return {"units_coordinate": coordinate} if coordinate is not None else {}


def axis_units_attrs(units: Sequence[str] | None, axis: str, *, squared: bool = False) -> dict[str, str]:
    """:func:`units_attrs` of a variable over the labeled ``axis`` of :func:`axis_coords` (``{axis}_units``).

    ``units`` are the per-entry units given to :func:`axis_coords` (None: none, so no units).
    """
    return units_attrs(units, f"{axis}_units" if units is not None else None, squared=squared)


def cost_units(output_units: str | Sequence[str] | None, *, whitened: bool) -> dict[str, str]:
    """Units of a (half) sum of squared residuals: ``1`` when whitened, else the squared output units.

    A residual divided by its standard deviation is dimensionless, so a whitened cost (known noise)
    has units ``1``. With unknown noise the residuals enter with unit weights, so the cost is in the
    squared output units (its number changes with the output's unit: it is not dimensionless); with
    outputs in different units no single unit exists and ``units_note`` says so.
    """
    if whitened:
        return {"units": "1"}
    one = common_units(output_units)
    if one is not None:
        return {"units": product(one, one)}
    return {"units_note": "unweighted sum over outputs in different units (no noise given): no single unit"}


def position_label(ds: xr.Dataset | xr.DataArray, dim: str, index: int) -> str:
    """The label of position ``index`` on ``dim``: its ``<dim>_name`` or coordinate value, else the index; on a
    CF time axis its date (``2021-08-23``, with the time of day where it is not midnight), decoded or not."""
    for key in (f"{dim}_name", dim):
        if key in ds.coords:
            value = ds[key].values[index]
            units = str(ds[key].attrs.get("units", ""))
            if " since " in units and isinstance(value, (int, float, np.number)):
                return instant_text(value, units, str(ds[key].attrs.get("calendar", "standard")))
            if isinstance(value, np.datetime64):
                midnight = value == value.astype("datetime64[D]")
                return str(np.datetime_as_string(value, unit="D" if midnight else "s"))
            return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)
    return str(index)
