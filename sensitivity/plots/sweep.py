"""Figures of a sweep: how strongly and how variably each parameter moves each output."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay

#: Quantiles over the sweep points: the band and the line.
QUANTILES = (0.05, 0.5, 0.95)


def sweep_figure(path: str | Path, figure_path: str | Path, max_samples: int = 20000) -> Path:
    """Scaled derivatives of a sweep: median dy/dx times each parameter's range, and the 5-95 % band.

    Multiplying by the range swept (max - min of the parameter over the sweep) puts parameters
    with different units on one scale: the change of the output across the parameter's range,
    to first order, in the output's units.

    Laid out by :mod:`sensitivity.plots.layout`: a series per label panel (a line and band per
    parameter, against the output's coordinate); named scalars side by side per parameter; a field
    as maps of the median ``|dy/dx| x range``, one per parameter (columns) and label panel (rows).

    Parameters
    ----------
    path
        A ``sweep.nc`` file.
    figure_path
        Where to write the PNG.
    max_samples
        At most this many samples (the first ones) are read, so large sweeps plot quickly.
    """
    with xr.open_dataset(path) as ds:
        ds = ds.isel(sample=slice(0, max_samples)).load()
    jac = ds["jacobian"]
    output = ds[next(v for v in ds.data_vars if v not in ("x", "jacobian"))]
    scaled = jac * (ds["x"].max("sample") - ds["x"].min("sample"))
    shown, note = lay.most_influential(np.abs(scaled).median("sample"), "median |dy/dx| x range")
    scaled = scaled.isel(parameter=shown)
    names = [pos.labels(ds, "parameter")[k] for k in shown]
    plan = pos.plan(output, pos.output_dims(output))
    n = ds.sizes["sample"]
    if plan.kind == "map":
        return _maps(np.abs(scaled).median("sample"), output, plan, names, n, figure_path, note)
    bands = scaled.quantile(list(QUANTILES), dim="sample").transpose("quantile", "parameter", ...)
    fig, axes = lay.wrapped(len(plan.panels))
    shift = lay.offsets(len(names))
    for ax, panel in zip(axes, plan.panels):
        low, mid, high = lay.along_x(bands, plan, panel)  # [parameter, x] each
        x = lay.x_positions(output, plan, panel)
        for k, name in enumerate(names):
            if plan.kind == "lines":
                line, = ax.plot(x, mid[k], label=name)
                ax.fill_between(x, low[k], high[k], color=line.get_color(), alpha=0.15)
            else:
                ax.errorbar(x + shift[k], mid[k], yerr=[mid[k] - low[k], high[k] - mid[k]], fmt="o", capsize=3,
                            label=name)
        ax.axhline(0.0, color="0.6", lw=0.6, zorder=0)
        lay.format_x(ax, output, plan, panel)
        ax.set_ylabel(lay.quantity_label("dy/dx x range of x", lay.units(output, panel, plan)))
        ax.set_title(panel.title, fontsize="medium")
    lay.legend(fig, axes, title="parameter")
    fig.suptitle(f"{output.attrs.get('long_name', output.name)}: derivative x parameter range over {n} sweep "
                 f"points, median and 5-95 %{plan.note}{note}", fontsize="medium")
    return lay.save(fig, figure_path)


def _maps(median: xr.DataArray, output: xr.DataArray, plan: pos.Layout, names: list[str], n: int,
          figure_path: str | Path, note: str) -> Path:
    """Median ``|dy/dx| x range`` per parameter (columns) and label panel (rows), one colour scale per row."""
    fig, axes = lay.grid(len(plan.panels), len(names), size=(3.6, 3.0))
    for row, panel in zip(axes, plan.panels):
        values = lay.select(median, panel)
        top = float(np.nanmax(values.values)) if np.isfinite(values.values).any() else 1.0
        for k, (ax, name) in enumerate(zip(row, names)):
            mesh = lay.draw_map(ax, values.isel(parameter=k), plan, cmap="viridis", vmin=0.0, vmax=top or 1.0)
            ax.set_title(", ".join(t for t in (name, panel.title) if t), fontsize="medium")
        fig.colorbar(mesh, ax=list(row), label=lay.quantity_label("|dy/dx| x range of x", lay.units(output, panel)))
    fig.suptitle(f"{output.attrs.get('long_name', output.name)}: median |derivative| x parameter range over {n} "
                 f"sweep points{plan.note}{note}", fontsize="medium")
    return lay.save(fig, figure_path)
