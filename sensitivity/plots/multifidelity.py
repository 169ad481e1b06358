"""The figure of a multifidelity study (``multifidelity.nc``): the simulator-anchored Sobol' indices beside the
surrogate-only ones, each with its interval (:func:`multifidelity_figure`).

Laid out by the model's own output dims (:mod:`sensitivity.plots.layout`):

- a series (one numeric dim, e.g. ``day``): one panel per parameter (rows) and index (columns, S1 and ST), the
  anchored index and the surrogate-only one as lines along the series, each with its interval as a band; a
  labeled dim beside the series is held at its first label, which the title says;
- named scalars or a field: one row per shown output (each named scalar; a field's element of largest output
  variance, :func:`sensitivity.outputs.index_measures.shown_outputs`), columns S1 and ST: per parameter the anchored bar and
  the surrogate-only bar side by side, with their intervals as whiskers.

Past :data:`~sensitivity.plots.layout.MAX_PARAMETERS` parameters, the most influential by the anchored total index.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from sensitivity.datasets.settings import recorded_attr
from sensitivity.outputs import positions as pos
from sensitivity.outputs.index_measures import shown_outputs
from sensitivity.plots import layout as lay

#: The indices drawn: (variable, title).
INDICES = (("S1", "first-order index S1"), ("ST", "total index ST"))
#: The two estimates: (suffix of the variable, legend label, colour).
ESTIMATES = (("", "simulator-anchored", "C0"), ("_surrogate", "surrogate only", "C1"))


def multifidelity_figure(ds: xr.Dataset, path: str | Path) -> Path:
    """Draw the anchored and the surrogate-only indices of ``ds`` with their intervals into ``path``; return it."""
    shown, note = lay.most_influential(ds["ST"], "anchored total index")
    ds = ds.isel(parameter=shown)
    dims = pos.output_dims(ds["output_mean"])
    plan = pos.plan(ds["output_mean"], dims, categories=False) if dims else None
    if plan is not None and plan.kind == "lines":
        fig = _series(ds, plan)
    else:
        fig = _bars(ds)
    lay.legend(fig, fig.axes)
    fig.suptitle(f"Sobol' indices: simulator-anchored ({ds.attrs.get('n_sim_runs', '?')} simulator runs) and "
                 f"surrogate only, with {float(recorded_attr(ds, 'level', 0.95)):.0%} intervals{note}",
                 fontsize="medium")
    return lay.save(fig, path)


def _series(ds: xr.Dataset, plan: pos.Layout) -> plt.Figure:
    """Rows: parameters; columns: S1, ST; lines along the series with interval bands."""
    panel = plan.panels[0]
    names = [str(n) for n in ds["parameter_name"].values]
    fig, axes = lay.grid(len(names), len(INDICES), size=(4.0, 2.2), sharex=True)
    x = lay.x_positions(ds, plan, panel)
    for r, name in enumerate(names):
        for c, (var, title) in enumerate(INDICES):
            ax = axes[r, c]
            for suffix, label, colour in ESTIMATES:
                value = lay.along_x(ds[f"{var}{suffix}"].isel(parameter=r), plan, panel)
                low, high = lay.along_x(ds[f"{var}{suffix}_interval"].isel(parameter=r), plan, panel)
                ax.plot(x, value, color=colour, label=label, lw=1.2)
                ax.fill_between(x, low, high, color=colour, alpha=0.25, lw=0)
            where = f", {panel.title}" if panel.title else ""
            ax.set_title(f"{title}: {name}{where}", fontsize="small")
            if r == len(names) - 1:
                lay.format_x(ax, ds, plan, panel)
    return fig


def _bars(ds: xr.Dataset) -> plt.Figure:
    """Rows: shown outputs; columns: S1, ST; per parameter the two estimates' bars with interval whiskers."""
    rows = shown_outputs(ds, "output_mean", "output_variance")
    names = [str(n) for n in ds["parameter_name"].values]
    fig, axes = lay.grid(len(rows), len(INDICES), size=(max(3.0, 0.6 * len(names)), 2.6))
    x = np.arange(len(names), dtype=float)
    for r, (index, where) in enumerate(rows):
        for c, (var, title) in enumerate(INDICES):
            ax = axes[r, c]
            for k, (suffix, label, colour) in enumerate(ESTIMATES):
                value = ds[f"{var}{suffix}"].isel(index).transpose("parameter").values
                low, high = ds[f"{var}{suffix}_interval"].isel(index).transpose("parameter", "bound").values.T
                whiskers = np.vstack([np.clip(value - low, 0, None), np.clip(high - value, 0, None)])
                ax.bar(x + (k - 0.5) * 0.38, value, 0.38, yerr=whiskers, capsize=2, color=colour, label=label)
            lay.category_ticks(ax, names)
            ax.set_title(f"{title}\n{where}" if where else title, fontsize="small")
    return fig
