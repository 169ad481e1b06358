"""Where a result goes in a figure: axes, ticks, maps and legends for the panels of the model's outputs.

Every figure module lays out the model's outputs through :func:`sensitivity.outputs.positions.plan` (the panels,
which the studies' summaries follow too), so one rule holds in every figure, whatever the output's shape; this
module draws them: a numeric x dim labelled with its ``long_name`` and ``units`` (:func:`coord_label`), named
scalars' labels as tick labels, horizontal while they fit (:func:`category_ticks`), a map with a colorbar
(:func:`draw_map`). Several lines in one panel get a legend (:func:`legend`): on the panel when there is one,
else one for the figure below the panels. At most :data:`MAX_PARAMETERS` parameters get a line, a bar or a map:
past it (a field of inputs), the most influential ones (:func:`most_influential`), which the title says.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib import ticker
from matplotlib.font_manager import FontProperties

from sensitivity.outputs.positions import Layout, Panel, is_labeled, labels

#: Panels per row of a wrapped grid.
MAX_COLUMNS = 3
#: Tick labels (:func:`category_ticks`): a character's mean width and a line's height, in font sizes; the share
#: of a panel's planned width left after the constrained layout's decorations; the smallest font [pt].
CHAR_WIDTH, LINE_HEIGHT, LAYOUT_SHARE, MIN_TICK_POINTS = 0.62, 1.25, 0.8, 5.0
#: At most this many parameters get a bar, a line or a map (one colour each of matplotlib's cycle); past it, the
#: most influential ones (:func:`most_influential`), and the figure's title says so.
MAX_PARAMETERS = 10


# ----------------------------------------------------------------------------- reading the dims
def coord_label(obj: xr.DataArray | xr.Dataset, dim: str) -> str:
    """Axis label of a dim: ``long_name [units]`` of a numeric coordinate, the dim's name otherwise."""
    if is_labeled(obj, dim) or dim not in obj.coords:
        return dim
    attrs = obj[dim].attrs
    units = attrs.get("units")
    return f"{attrs.get('long_name') or dim}" + (f" [{units}]" if units and units != "1" else "")


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
