"""Where a result goes in a figure: panels and axes from the model's own output dims.

Every figure module lays out the model's outputs through :func:`plan`, so one rule holds in every
figure, whatever the output's shape (:mod:`sensitivity.outputs.spec` states the contract):

- a *labeled* dim (``species = [prey, predator]``; in a dataset an integer index dim ``d`` with
  its labels in ``d_name``) gives one panel per label: small multiples titled ``species = prey``,
  so no line runs from the end of one label's series into the start of the next;
- one *numeric* dim (``day``) is the x axis, labelled with its ``long_name`` and ``units``: kind
  ``"lines"``;
- two numeric dims are a map (kind ``"map"``, drawn by :func:`draw_map` with a colorbar):
  longitude (or, failing a CF latitude/longitude pair, the last dim) across, latitude (the first)
  up; more than two: the last two are mapped (CF orders dims T, Z, Y, X) and the others held at
  their middle value (or, for observations, where most are), which every panel title states;
- named scalars (labeled dims only, kind ``"points"``): the last labeled dim is a categorical x
  axis with its labels as tick labels, horizontal while they fit; labels whose units differ
  (``d_units``) go to separate panels, one per unit, so a panel's y axis has one unit, and at most
  :data:`MAX_CATEGORIES` labels share a panel (more continue in the next). The other
  labeled dims give panels as above. ``categories=False`` gives every output a panel of its own
  (for figures whose x axis is something else, e.g. the parameters of an index bar chart).

At most ``max_panels`` panels are drawn (the first ones, in C order of the labels);
:attr:`Layout.note` says how many there were. Several lines in one panel get a legend
(:func:`legend`): on the panel when there is one, else one for the figure below the panels.
At most :data:`MAX_PARAMETERS` parameters get a line, a bar or a map: past it (a field of inputs),
the most influential ones (:func:`most_influential`), which the title says.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib import ticker
from matplotlib.font_manager import FontProperties

from sensitivity.outputs.spec import RESERVED_DIMS

#: At most this many panels per figure (the first ones).
MAX_PANELS = 12
#: Panels per row of a wrapped grid.
MAX_COLUMNS = 3
#: At most this many named scalars share a panel (more continue in the next one).
MAX_CATEGORIES = 16
#: Tick labels (:func:`category_ticks`): a character's mean width and a line's height, in font sizes; the share
#: of a panel's planned width left after the constrained layout's decorations; the smallest font [pt].
CHAR_WIDTH, LINE_HEIGHT, LAYOUT_SHARE, MIN_TICK_POINTS = 0.62, 1.25, 0.8, 5.0
#: At most this many parameters get a bar, a line or a map (one colour each of matplotlib's cycle); past it, the
#: most influential ones (:func:`most_influential`), and the figure's title says so.
MAX_PARAMETERS = 10

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


def coord_label(obj: xr.DataArray | xr.Dataset, dim: str) -> str:
    """Axis label of a dim: ``long_name [units]`` of a numeric coordinate, the dim's name otherwise."""
    if is_labeled(obj, dim) or dim not in obj.coords:
        return dim
    attrs = obj[dim].attrs
    units = attrs.get("units")
    return f"{attrs.get('long_name') or dim}" + (f" [{units}]" if units and units != "1" else "")


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


# ----------------------------------------------------------------------------- values of a panel
def select(da: xr.DataArray, panel: Panel) -> xr.DataArray:
    """``da`` at the panel's position (the dims of ``index`` that ``da`` has)."""
    return da.isel({d: i for d, i in panel.index.items() if d in da.dims})


def categories(layout: Layout, panel: Panel, obj: xr.DataArray | xr.Dataset) -> list[int]:
    """Positions along the categorical x dim in ``panel`` (kind ``"points"``; ``[0]`` without one)."""
    if layout.x is None:
        return [0]
    return list(panel.categories) if panel.categories is not None else list(range(obj.sizes[layout.x]))


def along_x(da: xr.DataArray, layout: Layout, panel: Panel) -> np.ndarray:
    """Values of ``da`` in ``panel`` along the x axis: ``[..., n_x]`` with ``da``'s other dims first.

    Kind ``"lines"``: along the numeric x dim; ``"points"``: the panel's categories (one value per panel
    when every output has its own panel).
    """
    da = select(da, panel)
    if layout.x is None:
        return da.values[..., None]
    return da.isel({layout.x: categories(layout, panel, da)}).transpose(..., layout.x).values


def x_positions(obj: xr.DataArray | xr.Dataset, layout: Layout, panel: Panel) -> np.ndarray:
    """Kind ``"lines"``: the x coordinate's values; ``"points"``: ``0 .. k-1`` for the panel's categories."""
    if layout.kind == "lines":
        if layout.x not in obj.coords:
            return np.arange(obj.sizes[layout.x], dtype=float)
        values = obj[layout.x].values
        return values if values.dtype.kind == "M" else values.astype(float)  # a decoded CF time axis: its dates
    return np.arange(len(categories(layout, panel, obj)), dtype=float)


def units(da: xr.DataArray, panel: Panel | None = None, layout: Layout | None = None) -> str | None:
    """The one unit of ``da``'s values in ``panel``: ``units``, or its ``units_coordinate`` there; None if mixed."""
    if "units" in da.attrs:
        return str(da.attrs["units"])
    name = da.attrs.get("units_coordinate")
    if name is None or name not in da.coords:
        return None
    coord = da[name]
    if panel is not None:
        coord = coord.isel({d: i for d, i in panel.index.items() if d in coord.dims})
        if layout is not None and layout.kind == "points" and layout.x in coord.dims:
            coord = coord.isel({layout.x: categories(layout, panel, da)})
    distinct = set(str(u) for u in np.ravel(coord.values))
    return distinct.pop() if len(distinct) == 1 else None


def quantity_label(text: str, unit: str | None) -> str:
    """``text [unit]`` (no brackets for an unknown unit)."""
    return f"{text} [{unit}]" if unit else text


# ----------------------------------------------------------------------------- axes
def grid(n_rows: int, n_cols: int, *, size: tuple[float, float] = (4.2, 3.0),
         **kwargs) -> tuple[plt.Figure, np.ndarray]:
    """A figure of ``n_rows x n_cols`` panels of about ``size`` inches each; axes as a 2-D array."""
    width = min(max(size[0] * n_cols, 7.0), 22.0)
    height = min(max(size[1] * n_rows + 0.8, 3.5), 30.0)
    return plt.subplots(n_rows, n_cols, figsize=(width, height), squeeze=False, layout="constrained", **kwargs)


def wrapped(n: int, *, size: tuple[float, float] = (4.2, 3.0), **kwargs) -> tuple[plt.Figure, list[plt.Axes]]:
    """``n`` panels in rows of at most :data:`MAX_COLUMNS`; the unused cells of the last row removed."""
    cols = min(n, MAX_COLUMNS)
    rows = -(-n // cols)
    fig, axes = grid(rows, cols, size=size, **kwargs)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def format_x(ax: plt.Axes, obj: xr.DataArray | xr.Dataset, layout: Layout, panel: Panel) -> None:
    """Label the x axis of a ``"lines"`` or ``"points"`` panel: the coordinate with units, or the categories."""
    if layout.kind == "lines":
        ax.set_xlabel(coord_label(obj, layout.x))
        return
    names = [labels(obj, layout.x)[i] for i in categories(layout, panel, obj)] if layout.x else [panel.title or ""]
    category_ticks(ax, names)
    ax.set_xlim(-0.6, len(names) - 0.4)


def most_influential(magnitude: xr.DataArray, measure: str) -> tuple[np.ndarray, str]:
    """The parameters a figure shows, in input order, and the note its title carries ("" when all are shown).

    Every parameter up to :data:`MAX_PARAMETERS`; past it (a field of inputs: 64 rainfall cells), the
    :data:`MAX_PARAMETERS` of largest ``|magnitude|`` (on ``parameter`` and any output dims), each output's
    divided by its largest over the parameters so that no output's size decides, then the largest over the
    outputs. ``measure`` names it in the note.
    """
    n = magnitude.sizes["parameter"]
    if n <= MAX_PARAMETERS:
        return np.arange(n), ""
    magnitude = abs(magnitude)
    largest = magnitude.max("parameter")
    score = (magnitude / largest.where(largest > 0)).max([d for d in magnitude.dims if d != "parameter"])
    order = np.argsort(-np.nan_to_num(score.transpose("parameter").values, nan=-np.inf), kind="stable")
    return np.sort(order[:MAX_PARAMETERS]), f"; the {MAX_PARAMETERS} of {n} parameters of largest {measure}"


def category_ticks(ax: plt.Axes, names: Sequence[str]) -> None:
    """Names as x tick labels that do not run together, for any number of names and panel width.

    Horizontal while the longest fits its slot (the panel's width over the names); else at 45 degrees while two
    neighbours' parallel lines stay a line height apart (the slot times sin 45); else upright, the font shrunk
    (to :data:`MIN_TICK_POINTS` at least) until a line height fits the slot. The slot is estimated before the
    constrained layout trims the panel for its decorations, hence :data:`LAYOUT_SHARE`.
    """
    size = FontProperties(size=plt.rcParams["xtick.labelsize"]).get_size_in_points()
    figure_width = ax.figure.get_figwidth() * 72.0  # [pt]
    slot = LAYOUT_SHARE * ax.get_position().width * figure_width / max(len(names), 1)  # [pt]
    longest = max((len(str(n)) for n in names), default=0) * CHAR_WIDTH * size
    if longest <= slot:
        rotation, align = 0, {"ha": "center"}
    elif slot * np.sin(np.pi / 4) >= LINE_HEIGHT * size:
        rotation, align = 45, {"ha": "right", "rotation_mode": "anchor"}
    else:
        rotation, align = 90, {"ha": "center"}
        size = max(MIN_TICK_POINTS, min(size, slot / LINE_HEIGHT))
    ax.set_xticks(range(len(names)), names, rotation=rotation, fontsize=size, **align)


def offsets(n: int, width: float = 0.6) -> np.ndarray:
    """Offsets of ``n`` side-by-side markers within one category (total ``width``)."""
    return (np.arange(n) - (n - 1) / 2) * (width / max(n, 1))


def draw_map(ax: plt.Axes, da: xr.DataArray, layout: Layout, *, colorbar: str | None = None, **kwargs):
    """``da`` (on the layout's ``y`` and ``x`` only) as a ``pcolormesh`` map with labelled axes.

    ``colorbar``: label of a colorbar beside the panel (None: none; the caller may share one).
    ``kwargs`` go to ``pcolormesh`` (``cmap``, ``vmin``, ``vmax``, ``norm``). Returns the mesh.
    """
    values = np.ma.masked_invalid(da.transpose(layout.y, layout.x).values)
    x = da[layout.x].values if layout.x in da.coords else np.arange(da.sizes[layout.x])
    y = da[layout.y].values if layout.y in da.coords else np.arange(da.sizes[layout.y])
    mesh = ax.pcolormesh(x, y, values, shading="nearest", **kwargs)
    ax.set_xlabel(coord_label(da, layout.x))
    ax.set_ylabel(coord_label(da, layout.y))
    if colorbar is not None:
        ax.figure.colorbar(mesh, ax=ax, label=colorbar)
    return mesh


def symmetric_limit(*arrays: np.ndarray) -> float:
    """The largest finite absolute value of ``arrays`` (1 when there is none): limits of a diverging map."""
    values = np.concatenate([np.ravel(a) for a in arrays])
    values = np.abs(values[np.isfinite(values)])
    return float(values.max()) if values.size and values.max() > 0 else 1.0


def legend(fig: plt.Figure, axes: Sequence[plt.Axes], **kwargs) -> None:
    """One legend of the entries the panels share: on the lone panel, else below the panels."""
    for ax in axes:
        handles, texts = ax.get_legend_handles_labels()
        if handles:
            break
    else:
        return
    if len(axes) == 1:
        axes[0].legend(handles, texts, fontsize="small", **kwargs)
    else:
        fig.legend(handles, texts, loc="outside lower center", ncol=min(len(texts), 6), fontsize="small", **kwargs)


_GROUPED_DIGITS = re.compile(r"(\d) (?=\d{3}\b)")  # "100 000": one word, never wrapped between its groups


def fit_text(fig: plt.Figure, rounds: int = 3) -> None:
    """Wrap every title and axis label wider than its room, so that none leaves the figure or runs into its
    neighbour's, whatever the length of a study's names and long names; thin numeric x ticks whose labels
    run into each other.

    The room of the figure's title is the figure's width; of a panel's title and x label, the panel's width;
    of its y label (a colorbar's label included), the panel's height. A too-long line is wrapped at word
    boundaries to the share of its characters that fits (a number grouped by spaces, ``100 000``, stays
    whole); numeric x ticks whose labels overlap are halved in number (category ticks keep theirs). The
    constrained layout then re-flows the panels (laid out, not rendered), so the check runs again, at most
    ``rounds`` times; its last layout is kept (the engine is switched off), so writing the figure does not
    lay it out once more.
    """
    engine = fig.get_layout_engine()
    for done in range(rounds + 1):
        if engine is None:
            fig.draw_without_rendering()
        else:  # the layout alone (text extents and panel positions), without drawing every artist
            engine.execute(fig)
        if done == rounds or not _fit_once(fig):  # laid out for the text as it is now
            break
    if engine is not None:  # that layout holds: writing the figure need not redo it
        fig.set_layout_engine("none")


def _fit_once(fig: plt.Figure) -> bool:
    """One pass of :func:`fit_text` over the laid-out figure; True if any text or ticks changed."""
    changed = fig._suptitle is not None and _wrap_to(fig._suptitle, 0.98 * fig.bbox.width)
    for ax in fig.axes:
        box = ax.get_window_extent()
        for text in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label):
            changed |= _wrap_to(text, max(box.width, 0.98 * fig.bbox.width / 8))
        changed |= _wrap_to(ax.yaxis.label, box.height)
        changed |= _thin_ticks(ax.xaxis)
    return changed


def _wrap_to(text, room: float) -> bool:
    """Wrap ``text`` (a matplotlib Text) to ``room`` pixels along its direction; True if it changed."""
    import textwrap

    extent = text.get_window_extent()
    width = extent.width if text.get_rotation() in (0.0, 180.0) else extent.height
    if not text.get_text().strip() or width <= room or room <= 0:
        return False
    lines = text.get_text().split("\n")
    chars = max(8, int(max(len(line) for line in lines) * room / width * 0.95))
    wrapped = "\n".join(textwrap.fill(_GROUPED_DIGITS.sub("\\1\u00a0", line), chars, break_on_hyphens=False)
                        .replace("\u00a0", " ") for line in lines)
    if wrapped == text.get_text():
        return False
    text.set_text(wrapped)
    return True


def _thin_ticks(axis) -> bool:
    """Halve the number of numeric ticks whose labels run into each other (categories keep theirs)."""
    if isinstance(axis.get_major_locator(), ticker.FixedLocator):
        return False
    shown = [t.get_window_extent() for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
    if not any(a.x1 > b.x0 for a, b in zip(shown, shown[1:])):
        return False
    axis.set_major_locator(ticker.MaxNLocator(nbins=max(2, len(shown) // 2)))
    return True


def save(fig: plt.Figure, figure_path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` as a PNG, its text wrapped to fit (:func:`fit_text`), and close it."""
    figure_path = Path(figure_path)
    fit_text(fig)
    fig.savefig(figure_path, dpi=dpi)
    plt.close(fig)
    return figure_path
