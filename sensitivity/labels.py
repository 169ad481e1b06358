"""Labeled coordinates shared by every dataset: parameters, flat outputs, square matrices.

netCDF and the CF checker reject string *dimension* coordinates, so every labeled
axis is an integer index dimension with the names (and units) carried as
non-dimension coordinates, e.g. ``parameter_name(parameter)``. Use
:func:`sensitivity.datasets.by_name` (or ``ds.set_xindex("parameter_name")``) to
select by name.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import xarray as xr


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


def output_coords(names: Sequence[str], units: Sequence[str] | None = None) -> dict[str, xr.Variable]:
    """Coordinates of a flat ``output`` axis."""
    return axis_coords("output", names, units)


def matrix_coords(axis: str, names: Sequence[str], units: Sequence[str] | None = None) -> dict[str, xr.Variable]:
    """Coordinates of a square matrix over ``axis``: dims ``{axis}_i`` and ``{axis}_j``."""
    return {**axis_coords(f"{axis}_i", names, units), **axis_coords(f"{axis}_j", names, units)}
