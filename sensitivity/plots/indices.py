"""Figures of sensitivity indices (``indices.nc``): bars with intervals per method, ranking comparison,
active-subspace spectrum, and indices resolved along a time series (or mapped over a field)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from sensitivity.plots import layout as lay

#: Per-output importance measures, in panel order: (variable, its interval or None, panel title).
MEASURES: tuple[tuple[str, str | None, str], ...] = (
    ("sobol_S1", "sobol_S1_interval", "Sobol' first order S1"),
    ("sobol_ST", "sobol_ST_interval", "Sobol' total ST"),
    ("dgsm_sobol_total_bound", "dgsm_sobol_total_bound_interval", "DGSM bound on ST"),
    ("morris_mu_star", "morris_mu_star_interval", "Morris mu*"),
    ("active_subspace_activity_score", None, "activity score"),
    ("local_sigma_normalized", None, "|sigma-normalised derivative| at nominal"),
)
#: Total-effect measures, in the order a field's map prefers them.
TOTAL = ("sobol_ST", "dgsm_sobol_total_bound", "morris_mu_star", "active_subspace_activity_score")
#: Dims of ``indices.nc`` that are not the model's output dims (besides the dataset contract's own).
INDEX_DIMS = ("direction", "group", "n_samples", "measure", "measure_i", "measure_j", "quantity")
#: At most this many outputs get a row of bars.
MAX_SHOWN = 8


def indices_figures(path: str | Path, out_dir: str | Path) -> list[Path]:
    """Write every figure that ``indices.nc`` supports into ``out_dir``; return their paths.

    ``indices_bars.png`` and ``indices_ranking.png`` always (when the methods exist),
    ``indices_active_subspace.png`` with active subspaces, and ``indices_resolved.png``
    for an output with a numeric dim: lines along a series, or maps of the total index over a field.
    """
    out_dir = Path(out_dir)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    figures = [bars_figure(ds, out_dir / "indices_bars.png")]
    if "rank" in ds:
        figures.append(ranking_figure(ds, out_dir / "indices_ranking.png"))
    if "active_subspace_eigenvalue" in ds or "active_subspace_quantity_eigenvalue" in ds:
        figures.append(active_subspace_figure(ds, out_dir / "indices_active_subspace.png"))
    measure = _reference(ds)
    if measure is not None and _plan(ds[measure]).kind != "points":
        figures.append(resolved_figure(ds, out_dir / "indices_resolved.png"))
    return [f for f in figures if f is not None]


# ----------------------------------------------------------------------------- selection
def _reference(ds: xr.Dataset) -> str | None:
    """The first per-output variable of ``ds``: its dims are the model's."""
    return next((n for n in [m[0] for m in MEASURES] + ["dgsm_nu", "active_subspace_eigenvalue"] if n in ds), None)


def output_dims(ds: xr.Dataset) -> list[str]:
    """The model's own output dims in ``ds`` (``["output"]`` for named scalars, e.g. ``["day"]`` for the SEIR demo)."""
    name = _reference(ds)
    return [] if name is None else lay.output_dims(ds[name], INDEX_DIMS)


def _plan(da: xr.DataArray, **kwargs) -> lay.Layout:
    return lay.plan(da, lay.output_dims(da, INDEX_DIMS), **kwargs)


def shown_outputs(ds: xr.Dataset) -> list[tuple[dict[str, int], str]]:
    """Which outputs the bar, ranking and active-subspace figures show: ``(isel, label)`` pairs.

    Named scalars: each output (the first :data:`MAX_SHOWN`). A series or a field: in each panel of
    its layout (one per label of a labeled dim), the element with the largest output variance (the
    most informative one to rank parameters on).
    """
    dims = output_dims(ds)
    if not dims:
        return [({}, "")]
    plan = _plan(ds[_reference(ds)], categories=False, max_panels=MAX_SHOWN)
    if plan.kind == "points":
        return [(dict(p.index), p.title) for p in plan.panels]
    variance = next((ds[v] for v in ("sobol_variance", "dgsm_variance") if v in ds), None)
    numeric = [d for d in dims if not lay.is_labeled(ds, d)]
    shown = []
    for panel in plan.panels:
        labels = {d: i for d, i in panel.index.items() if d not in numeric}
        if variance is None:
            where = {d: ds.sizes[d] // 2 for d in numeric}
        else:
            values = variance.isel(labels).transpose(*numeric).values
            flat = int(np.nanargmax(np.nan_to_num(values, nan=-np.inf)))
            where = dict(zip(numeric, (int(i) for i in np.unravel_index(flat, values.shape))))
        index = {**labels, **where}
        shown.append((index, lay.position_text(ds, index)))
    return shown


def _where(ds: xr.Dataset) -> str:
    """How :func:`shown_outputs` chose the outputs, for a figure's title."""
    if not output_dims(ds):
        return ""
    plan = _plan(ds[_reference(ds)], categories=False, max_panels=MAX_SHOWN)
    if plan.kind == "points":
        return f"; first {len(plan.panels)} of {plan.total} outputs" if plan.note else ""
    return "; at the output of largest variance" + (" per panel" if plan.total > 1 else "") + plan.note


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating, int, np.integer)) else str(value)


def _names(ds: xr.Dataset, axis: str = "parameter") -> list[str]:
    return [str(n) for n in ds[f"{axis}_name"].values]


# ----------------------------------------------------------------------------- figures
def bars_figure(ds: xr.Dataset, figure_path: Path) -> Path | None:
    """One panel per shown output (rows) and method (columns): bars per parameter with interval whiskers."""
    present = [m for m in MEASURES if m[0] in ds]
    if not present:
        return None
    rows = shown_outputs(ds)
    names = _names(ds)
    fig, axes = lay.grid(len(rows), len(present), size=(3.0, 2.5))
    x = np.arange(len(names))
    for r, (index, label) in enumerate(rows):
        for c, (var, interval, title) in enumerate(present):
            ax = axes[r, c]
            da = ds[var].isel(index)
            value = da.transpose("parameter").values
            value = np.abs(value) if var.startswith("local") else value
            err = None
            if interval is not None and interval in ds:
                low, high = ds[interval].isel(index).transpose("parameter", "bound").values.T
                err = np.vstack([np.clip(value - low, 0, None), np.clip(high - value, 0, None)])
            ax.bar(x, value, yerr=err, capsize=3, color=f"C{c}")
            lay.category_ticks(ax, names)
            ax.set_title(f"{title}\n{label}" if label else title, fontsize="small")
            unit = lay.units(da)
            if unit and unit != "1":
                ax.set_ylabel(f"[{unit}]", fontsize="small")
    fig.suptitle(f"sensitivity indices by method (whiskers: confidence intervals){_where(ds)}", fontsize="medium")
    return lay.save(fig, figure_path)


def ranking_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Ranks of the parameters by each measure, and Kendall's tau between measures, for the first shown output."""
    index, label = shown_outputs(ds)[0]
    measures, names = _names(ds, "measure"), _names(ds)
    rank = ds["rank"].isel(index).transpose("measure", "parameter").values
    tau = ds["kendall_tau"].isel(index).transpose("measure_i", "measure_j").values
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 0.5 * len(measures) + 3), constrained_layout=True)
    im = ax0.imshow(rank, cmap="viridis_r", aspect="auto")
    for (i, j), v in np.ndenumerate(rank):
        ax0.text(j, i, _fmt(v), ha="center", va="center", color="w", fontsize="small")
    lay.category_ticks(ax0, names)
    ax0.set_yticks(range(len(measures)), measures)
    ax0.set_title(f"parameter rank (1 = most important)\n{label}", fontsize="medium")
    fig.colorbar(im, ax=ax0)
    im = ax1.imshow(tau, cmap="RdBu", vmin=-1, vmax=1)
    ax1.set_xticks(range(len(measures)), measures, rotation=45, ha="right")
    ax1.set_yticks(range(len(measures)), measures)
    ax1.set_title("Kendall tau-b between rankings", fontsize="medium")
    fig.colorbar(im, ax=ax1)
    return lay.save(fig, figure_path)


def active_subspace_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Eigenvalue spectrum with intervals (log scale) and the leading direction, per shown output / quantity."""
    panels = []
    if "active_subspace_eigenvalue" in ds:
        panels += [("active_subspace", index, label) for index, label in shown_outputs(ds)]
    if "active_subspace_quantity_eigenvalue" in ds:
        panels.append(("active_subspace_quantity", {"quantity": 0}, str(ds["quantity_name"].values[0])))
    fig, axes = plt.subplots(2, len(panels), figsize=(max(6.0, 4.0 * len(panels)), 6), squeeze=False,
                             constrained_layout=True)
    names = _names(ds)
    for c, (prefix, index, label) in enumerate(panels):
        values = ds[f"{prefix}_eigenvalue"].isel(index).transpose("direction").values
        k = np.arange(1, len(values) + 1)
        floor = np.nanmax(values) * 1e-12 if np.nanmax(values) > 0 else 1e-300
        axes[0, c].semilogy(k, np.maximum(values, floor), "o-")
        if f"{prefix}_eigenvalue_interval" in ds:  # absent with `intervals.method=none`
            low, high = ds[f"{prefix}_eigenvalue_interval"].isel(index).transpose("direction", "bound").values.T
            axes[0, c].fill_between(k, np.maximum(low, floor), np.maximum(high, floor), alpha=0.3)
        axes[0, c].set_xticks(k)
        axes[0, c].set_xlabel("eigenvalue index")
        axes[0, c].set_title(label, fontsize="medium")
        vector = ds[f"{prefix}_eigenvector"].isel(index).isel(direction=0).transpose("parameter").values
        axes[1, c].bar(range(len(names)), vector)
        lay.category_ticks(axes[1, c], names)
        axes[1, c].set_title("leading direction w1", fontsize="medium")
    fig.suptitle("active subspace: eigenvalues of E[grad f grad f^T] (band: confidence interval)", fontsize="medium")
    return lay.save(fig, figure_path)


def resolved_figure(ds: xr.Dataset, figure_path: Path) -> Path | None:
    """Indices resolved along the model's numeric dims, laid out by :mod:`sensitivity.plots.layout`.

    A series: one row per measure and one column per label panel, a line per parameter with its
    interval band, a legend of the parameters. A field: maps of the total index (Sobol' ST, else the
    DGSM bound, Morris mu* or the activity score), one column per parameter and row per label panel.
    """
    present = [m for m in MEASURES if m[0] in ds and not m[0].startswith("local")]
    if not present:  # the local method alone: its bars are the whole story
        return None
    names = _names(ds)
    plan = _plan(ds[present[0][0]])
    if plan.kind == "map":
        return _total_maps(ds, plan, present, names, figure_path)
    fig, axes = lay.grid(len(present), len(plan.panels), size=(4.2, 2.4), sharex=True)
    for r, (var, interval, title) in enumerate(present):
        for c, panel in enumerate(plan.panels):
            ax = axes[r, c]
            t = lay.x_positions(ds[var], plan, panel)
            values = lay.along_x(ds[var].transpose("parameter", ...), plan, panel)
            bands = (lay.along_x(ds[interval].transpose("parameter", "bound", ...), plan, panel)
                     if interval is not None and interval in ds else None)
            for j, name in enumerate(names):
                line, = ax.plot(t, values[j], label=name)
                if bands is not None:
                    ax.fill_between(t, bands[j, 0], bands[j, 1], color=line.get_color(), alpha=0.2)
            ax.set_title(", ".join(x for x in (title, panel.title) if x), fontsize="small")
            unit = lay.units(ds[var], panel)
            if unit and unit != "1":
                ax.set_ylabel(f"[{unit}]", fontsize="small")
    for ax in axes[-1]:
        lay.format_x(ax, ds, plan, plan.panels[0])
    lay.legend(fig, list(axes.ravel()), title="parameter")
    fig.suptitle(f"indices resolved along {lay.coord_label(ds, plan.x)} (bands: confidence intervals){plan.note}",
                 fontsize="medium")
    return lay.save(fig, figure_path)


def _total_maps(ds: xr.Dataset, plan: lay.Layout, present, names: list[str], figure_path: Path) -> Path:
    """Maps of the total index per parameter (columns) and label panel (rows), on one colour scale."""
    var, _, title = next((m for m in present if m[0] in TOTAL), present[0])
    da = ds[var]
    finite = da.values[np.isfinite(da.values)]
    top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    fig, axes = lay.grid(len(plan.panels), len(names), size=(3.4, 2.9))
    for row, panel in zip(axes, plan.panels):
        for j, (ax, name) in enumerate(zip(row, names)):
            mesh = lay.draw_map(ax, lay.select(da, panel).isel(parameter=j), plan, cmap="viridis", vmin=0.0, vmax=top)
            ax.set_title(", ".join(x for x in (name, panel.title) if x), fontsize="medium")
    fig.colorbar(mesh, ax=list(axes.ravel()), label=lay.quantity_label(title, lay.units(da)))
    fig.suptitle(f"{title} over the output field, per parameter{plan.note}", fontsize="medium")
    return lay.save(fig, figure_path)
