"""Maps of sensitivity indices over a field of inputs: which cells of a conductivity or rainfall field drive an output.

A field of inputs is a set of parameters named ``<field>_<cell>`` (``logk_00`` .. ``logk_44``) in the space's
order, laid out in C order on a grid of ``shape`` (``input_fields: {logk: [5, 5]}`` in the indices workflow;
:mod:`sensitivity.inputs.fields`). Each
map shows one total-effect measure per cell, aggregated over the model's outputs: per label of its first labeled
output dim (a well, a species) when it has one, over every other output dim. Variance-based indices are aggregated
with the outputs' variances as weights (the aggregated index of Gamboa et al. 2013, doi:10.1214/14-EJS895, of
that group of outputs), the others by their mean.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay

#: Measures a map shows, in order, with the variance that weights them (None: a plain mean) and a title.
MAP_MEASURES: tuple[tuple[str, str | None, str], ...] = (
    ("sobol_ST", "sobol_variance", "Sobol' total ST"),
    ("dgsm_sobol_total_bound", "dgsm_variance", "DGSM bound on ST"),
    ("active_subspace_activity_score", None, "activity score"),
    ("morris_mu_star", None, "Morris mu*"),
    ("shapley_effect", "shapley_variance", "Shapley effect"),
    ("sobol_dependent_ST_ind", "sobol_dependent_variance", "independent total (dependent)"),
)
#: At most this many measures (rows) and output labels (columns) per figure.
MAX_ROWS, MAX_COLUMNS = 3, 4


def field_maps(ds: xr.Dataset, cells: np.ndarray, shape: Sequence[int]) -> list[tuple[str, str, np.ndarray]]:
    """``(measure title, column label, map [rows, cols])`` of each measure of :data:`MAP_MEASURES` in ``ds``
    (at most :data:`MAX_ROWS`), per label of the first labeled output dim (at most :data:`MAX_COLUMNS`)."""
    shape2 = (1, shape[0]) if len(shape) == 1 else tuple(shape)
    maps = []
    for var, weight, title in [m for m in MAP_MEASURES if m[0] in ds][:MAX_ROWS]:
        index = ds[var].isel(parameter=cells)
        dims = [d for d in index.dims if d != "parameter"]
        labeled = next((d for d in dims if pos.is_labeled(ds, d)), None)
        columns = [(None, "all outputs")] if labeled is None else [
            (i, pos.position_text(ds, {labeled: i})) for i in range(min(ds.sizes[labeled], MAX_COLUMNS))]
        for position, label in columns:
            one = index if position is None else index.isel({labeled: position})
            rest = [d for d in one.dims if d != "parameter"]
            if weight in ds and rest:
                w = ds[weight] if position is None else ds[weight].isel({labeled: position})
                w = w.where(np.isfinite(one).all("parameter"))
                value = (one * w).sum(rest) / w.sum(rest)
            else:
                value = one.mean(rest) if rest else one
            maps.append((title, label, np.asarray(value.transpose("parameter").values, float).reshape(shape2)))
    return maps


def field_figure(ds: xr.Dataset, field: str, cells: np.ndarray, shape: Sequence[int],
                 figure_path: Path) -> Path | None:
    """:func:`field_maps` of ``field`` drawn: a 2-D field as maps (a row per measure, a column per output label), a
    1-D field as lines over its cells (a panel per measure, a line per output label)."""
    maps = field_maps(ds, cells, shape)
    if not maps:
        return None
    titles = list(dict.fromkeys(t for t, _, _ in maps))
    labels = list(dict.fromkeys(c for _, c, _ in maps))
    fig = _draw_profiles(maps, titles, field, shape[0]) if len(shape) == 1 else _draw_maps(maps, titles, labels, field)
    fig.suptitle(f"indices over the input field {field} ({' x '.join(map(str, shape))} cells, parameters {field}_*); "
                 "variance-weighted over the other output dims (means for Morris and activity scores)", fontsize=9)
    return lay.save(fig, figure_path)


def _draw_maps(maps, titles: list[str], labels: list[str], field: str) -> plt.Figure:
    """A 2-D field: one map per measure (rows) and output label (columns), each with its colorbar."""
    rows, columns = len(titles), len(labels)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns + 0.8, 2.9 * rows + 0.8), squeeze=False,
                             constrained_layout=True)
    for title, label, values in maps:
        ax = axes[titles.index(title), labels.index(label)]
        image = ax.imshow(values, origin="upper", cmap="viridis", interpolation="nearest")
        fig.colorbar(image, ax=ax, shrink=0.85)
        ax.set_title(f"{title}, {label}", fontsize=8)
        ax.set_xlabel(f"{field} column", fontsize=7)
        ax.set_ylabel(f"{field} row", fontsize=7)
        ax.tick_params(labelsize=6)
    return fig


def _draw_profiles(maps, titles: list[str], field: str, cells: int) -> plt.Figure:
    """A 1-D field: one panel per measure, a line over the cells per output label (a strip map one cell tall
    would be a few pixels high)."""
    fig, axes = lay.grid(len(titles), 1, size=(min(0.25 * cells + 3.0, 12.0), 2.6))
    for title, label, values in maps:
        ax = axes[titles.index(title), 0]
        ax.plot(np.arange(cells), values.ravel(), marker="o", markersize=3, label=label)
        ax.set_title(title, fontsize="small")
        ax.set_xlabel(f"{field} cell")
    for ax in axes[:, 0]:
        ax.legend(fontsize="small")
    return fig
