"""Positions on the model's own output dims, and the panels that figures and summaries lay them out in.

The figures (:mod:`sensitivity.plots`) and the studies' summaries read a result's outputs the same way, whatever
the output's shape (:mod:`sensitivity.outputs.spec` states the contract), so that a summary's table shows the
outputs its figure shows:

- a *labeled* dim (``species = [prey, predator]``; in a dataset an integer index dim ``d`` with
  its labels in ``d_name``) gives one panel per label: small multiples titled ``species = prey``
  (:func:`position_text`), so no line runs from the end of one label's series into the start of the next;
- one *numeric* dim (``day``) is the x axis: kind ``"lines"``;
- two numeric dims are a map (kind ``"map"``): longitude (or, failing a CF latitude/longitude pair, the last
  dim) across, latitude (the first) up; more than two: the last two are mapped (CF orders dims T, Z, Y, X) and
  the others held at their middle value (or, for observations, where most are), which every panel title states;
- named scalars (labeled dims only, kind ``"points"``): the last labeled dim is a categorical x
  axis; labels whose units differ (``d_units``) go to separate panels, one per unit, so a panel's y axis has
  one unit, and at most :data:`MAX_CATEGORIES` labels share a panel (more continue in the next). The other
  labeled dims give panels as above. ``categories=False`` gives every output a panel of its own
  (for a figure whose x axis is something else, e.g. the parameters of an index bar chart, and its table).

At most ``max_panels`` panels are laid out (the first ones, in C order of the labels);
:attr:`Layout.note` says how many there were.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

import numpy as np

from sensitivity.outputs.spec import RESERVED_DIMS
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: At most this many panels per figure (the first ones).
MAX_PANELS = 12
#: At most this many named scalars share a panel (more continue in the next one).
MAX_CATEGORIES = 16

Kind = Literal["points", "lines", "map"]
_ACROSS = {"lon", "longitude"}
_UP = {"lat", "latitude"}


@dataclass(frozen=True)
class Panel:
    """One panel: where it sits in the model's outputs.

    Attributes
    ----------
    title
        The labels (and held values) of this panel, e.g. ``"species = prey"``; empty for a lone panel.
    index
        ``isel`` of this panel on the model's dims (labeled dims split into panels, held numeric dims).
    categories
        Kind ``"points"``: positions along the categorical x dim shown in this panel (None: all).
    """

    title: str
    index: Mapping[str, int]
    categories: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Layout:
    """How a figure lays out the model's outputs (see the module notes).

    Attributes
    ----------
    kind
        ``"points"`` (named scalars), ``"lines"`` (a series along ``x``) or ``"map"`` (``y`` up, ``x`` across).
    panels
        The panels drawn.
    x
        The dim along the x axis: the categorical labeled dim (``"points"``; None when every output has
        a panel of its own), the numeric dim (``"lines"``), the dim across a map.
    y
        The dim up a map (None otherwise).
    total
        Panels there would be without the cap.
    """

    kind: Kind
    panels: tuple[Panel, ...]
    x: str | None = None
    y: str | None = None
    total: int = 1

    @property
    def note(self) -> str:
        """``" (first 12 of 40 panels)"`` when panels were left out, else ``""``."""
        return f" (first {len(self.panels)} of {self.total} panels)" if self.total > len(self.panels) else ""


# ----------------------------------------------------------------------------- reading the dims
def output_dims(da: xr.DataArray, exclude: Sequence[str] = ()) -> list[str]:
    """The model's own output dims of ``da``: every dim but the dataset contract's (``sample``,
    ``parameter``, ``bound``, ``propagation_method`` ...) and ``exclude``."""
    return [d for d in da.dims if d not in RESERVED_DIMS and d not in exclude]


def is_labeled(obj: xr.DataArray | xr.Dataset, dim: str) -> bool:
    """True for a labeled dim: an index dim with its labels in ``<dim>_name``."""
    return f"{dim}_name" in obj.coords


def labels(obj: xr.DataArray | xr.Dataset, dim: str) -> list[str]:
    """The labels of a labeled dim."""
    return [str(v) for v in obj[f"{dim}_name"].values]



def _value_text(obj: xr.DataArray | xr.Dataset, dim: str, i: int) -> str:
    """``species = prey`` or ``depth = 5 m``: one position of a dim, for a title."""
    if is_labeled(obj, dim):
        return f"{dim} = {labels(obj, dim)[i]}"
    if dim not in obj.coords:
        return f"{dim} = {i}"
    value, units = obj[dim].values[i], obj[dim].attrs.get("units", "")
    text = f"{value:g}" if isinstance(value, (float, np.floating, int, np.integer)) else str(value)
    return f"{dim} = {text}" + (f" {units}" if units and units != "1" else "")


def position_text(obj: xr.DataArray | xr.Dataset, index: Mapping[str, int]) -> str:
    """``species = prey, day = 8 day``: a position on the model's dims."""
    return ", ".join(_value_text(obj, d, int(i)) for d, i in index.items())


# ----------------------------------------------------------------------------- the plan
def plan(obj: xr.DataArray | xr.Dataset, dims: Sequence[str], *, categories: bool = True,
         max_panels: int = MAX_PANELS, shown: xr.DataArray | None = None) -> Layout:
    """Lay out the model's output ``dims`` of ``obj`` (see the module notes).

    Parameters
    ----------
    obj
        A variable on (at least) ``dims``, or its dataset: the coordinates tell labeled from numeric dims.
    dims
        The model's own output dims, outermost first (:func:`output_dims`).
    categories
        Named scalars: put the last labeled dim along a categorical x axis (True), or give every
        output a panel of its own (False).
    max_panels
        At most this many panels.
    shown
        True where an output has something to show (an observation): a held dim is then held at the position
        with the most, the middle one among equals, so that a figure of observations held at a year does not
        show a year without any.
    """
    labeled = [d for d in dims if is_labeled(obj, d)]
    numeric = [d for d in dims if d not in labeled]
    held, drawn = numeric[:-2], numeric[-2:]
    x = y = None
    if len(drawn) == 2:
        kind: Kind = "map"
        y, x = _map_axes(obj, drawn)
    elif drawn:
        kind, x = "lines", drawn[0]
    else:
        kind, x = "points", labeled[-1] if categories and labeled else None
    split = [d for d in labeled if d != x]
    groups = _unit_groups(obj, x) if kind == "points" and x is not None else [(None, "")]
    fixed = {d: _held_at(obj.sizes[d], None if shown is None else shown.sum([e for e in shown.dims if e != d]))
             for d in held}
    panels = []
    for combo in itertools.product(*[range(obj.sizes[d]) for d in split]):
        index = {**dict(zip(split, combo)), **fixed}
        for members, units in groups:
            title = position_text(obj, index)
            if len(groups) > 1 and units:
                title = ", ".join(t for t in (title, f"outputs in {units}") if t)
            panels.append(Panel(title, index, members))
    return Layout(kind, tuple(panels[:max_panels]), x, y, len(panels))


def _held_at(size: int, counts: xr.DataArray | None) -> int:
    """Where a held dim of ``size`` positions is held: the middle, or the position of most ``counts`` nearest it."""
    if counts is None:
        return size // 2
    counts = counts.values
    best = np.flatnonzero(counts == counts.max())
    return int(best[np.argmin(np.abs(best - size // 2))])


def _map_axes(obj: xr.DataArray | xr.Dataset, dims: list[str]) -> tuple[str, str]:
    """(up, across) of two numeric dims: latitude up and longitude across, else the first up."""
    def role(d: str) -> str:
        name = d.lower()
        standard = obj[d].attrs.get("standard_name", "") if d in obj.coords else ""
        if name in _ACROSS or standard == "longitude":
            return "across"
        return "up" if name in _UP or standard == "latitude" else ""

    first, second = dims
    return (second, first) if role(first) == "across" or role(second) == "up" else (first, second)


def _unit_groups(obj: xr.DataArray | xr.Dataset, dim: str) -> list[tuple[tuple[int, ...] | None, str]]:
    """Positions along a categorical ``dim`` grouped by their units (``<dim>_units``), in order of appearance,
    and cut into runs of at most :data:`MAX_CATEGORIES`; ``(None, units)`` for all of them in one panel."""
    n = obj.sizes[dim]
    units = [str(u) for u in obj[f"{dim}_units"].values] if f"{dim}_units" in obj.coords else [""] * n
    distinct = list(dict.fromkeys(units))
    if len(distinct) == 1 and n <= MAX_CATEGORIES:
        return [(None, distinct[0])]
    groups = []
    for one in distinct:
        members = [i for i, u in enumerate(units) if u == one]
        groups += [(tuple(members[k:k + MAX_CATEGORIES]), one) for k in range(0, len(members), MAX_CATEGORIES)]
    return groups

