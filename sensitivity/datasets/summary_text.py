"""Numbers, units and flag meanings of a dataset as the text of its summary (:mod:`.summary`)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.summary import BAD, GOOD, PLAIN, Cell

xr = lazy_import("xarray")

#: Significant digits of the numbers in the tables.
DIGITS = 4


def number(value: Any, digits: int = DIGITS) -> str:
    """A number in ``digits`` significant digits (integers as they are); NaN and infinities spelled out."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    v = float(value)
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def interval(low: Any, high: Any) -> str:
    """``[low, high]``."""
    return f"[{number(low)}, {number(high)}]"


def percent(share: Any) -> str:
    """A share in [0, 1] as a percentage."""
    return "NaN" if not np.isfinite(float(share)) else f"{100 * float(share):.3g}%"


def names(ds: xr.Dataset | xr.DataArray, axis: str) -> list[str]:
    """The labels of a labeled axis (``parameter_name``)."""
    return [str(n) for n in ds[f"{axis}_name"].values]


def units_at(da: xr.DataArray, index: Mapping[str, int] | None = None) -> str:
    """The units of ``da`` at ``index``: its ``units``, or its ``units_coordinate`` there (per-label units);
    '' when it has neither or the units differ within the selection."""
    if "units" in da.attrs:
        return str(da.attrs["units"])
    name = da.attrs.get("units_coordinate")
    if name is None or name not in da.coords:
        return ""
    coord = da[name]
    coord = coord.isel({d: i for d, i in (index or {}).items() if d in coord.dims})
    distinct = {str(u) for u in np.ravel(coord.values)}
    return distinct.pop() if len(distinct) == 1 else ""


def with_units(label: str, units: str) -> str:
    """``label [units]``, or the label alone without units."""
    return f"{label} [{units}]" if units else label


def meaning(da: xr.DataArray, value: Any) -> str:
    """The CF flag meaning of ``value`` in ``da`` (``flag_values``/``flag_meanings``), else the value itself."""
    values, meanings = da.attrs.get("flag_values"), str(da.attrs.get("flag_meanings", "")).split()
    if values is not None and len(meanings) == len(np.atleast_1d(values)):
        for v, m in zip(np.atleast_1d(values), meanings):
            if v == value:
                return m.replace("_", " ")
    return str(value)


def checked(text: str, ok: bool | None) -> Cell:
    """A cell flagged by a check: good when ``ok``, bad when not, plain when None (not checked)."""
    return Cell(text, flag=PLAIN if ok is None else GOOD if ok else BAD)


def scalar(ds: xr.Dataset, name: str) -> Any:
    """The value of a 0-d variable (a Python scalar)."""
    return ds[name].values.item()
