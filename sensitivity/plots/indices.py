"""Figures of sensitivity indices (``indices.nc``): bars with intervals per method, ranking comparison,
active-subspace spectrum, indices resolved along a time series (or mapped over a field), the indices of
dependent inputs side by side (Shapley effects, full and independent Sobol' indices), and the aggregated
and PCA-based indices of a whole output."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from sensitivity.outputs import index_measures as iv
from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay
from sensitivity.inputs.fields import field_cells
from sensitivity.plots.fields import field_figure

#: Total-effect measures, in the order a field's map prefers them.
TOTAL = ("sobol_ST", "dgsm_sobol_total_bound", "morris_mu_star", "active_subspace_activity_score", "shapley_effect",
         "sobol_dependent_ST_ind", "given_data_S1")
#: The indices of dependent inputs, side by side in one figure: (variable, its interval, legend label).
DEPENDENT: tuple[tuple[str, str, str], ...] = (
    ("shapley_effect", "shapley_effect_interval", "Shapley effect"),
    ("sobol_dependent_S1_full", "sobol_dependent_S1_full_interval", "S1 full"),
    ("sobol_dependent_ST_full", "sobol_dependent_ST_full_interval", "ST full"),
    ("sobol_dependent_S1_ind", "sobol_dependent_S1_ind_interval", "S1 independent"),
    ("sobol_dependent_ST_ind", "sobol_dependent_ST_ind_interval", "ST independent"),
    ("shapley_S1_full", "shapley_S1_full_interval", "S1 full (Shapley costs)"),
    ("shapley_ST_ind", "shapley_ST_ind_interval", "ST independent (Shapley costs)"),
    ("given_data_S1", "given_data_S1_interval", "given-data S1"),
)
#: What ranks the parameters when there are more than :data:`~sensitivity.plots.layout.MAX_PARAMETERS`: the first present.
INFLUENCE = (*TOTAL, "aggregated_ST", "aggregated_ST_ind", "sobol_S1", "local_sigma_normalized")


def indices_figures(path: str | Path, out_dir: str | Path,
                    input_fields: Mapping[str, Sequence[int]] | None = None) -> list[Path]:
    """Write every figure that ``indices.nc`` supports into ``out_dir``; return their paths.

    ``indices_bars.png`` and ``indices_ranking.png`` always (when the methods exist),
    ``indices_active_subspace.png`` with active subspaces, ``indices_resolved.png`` for an output with a
    numeric dim (lines along a series, or maps of the total index over a field), ``indices_dependent.png``
    with Shapley effects or dependent Sobol' indices, ``indices_aggregated.png`` with aggregated indices, and
    ``indices_field_<name>.png`` per field of inputs in ``input_fields`` (``{name: shape}``: maps of the indices of
    its parameters ``<name>_*``, :mod:`sensitivity.plots.fields`).
    """
    out_dir = Path(out_dir)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    figures = [bars_figure(ds, out_dir / "indices_bars.png")]
    if "rank" in ds:
        figures.append(ranking_figure(ds, out_dir / "indices_ranking.png"))
    if "active_subspace_eigenvalue" in ds or "active_subspace_quantity_eigenvalue" in ds:
        figures.append(active_subspace_figure(ds, out_dir / "indices_active_subspace.png"))
    measure = iv.first_measure(ds)
    if measure is not None and iv.measure_plan(ds[measure]).kind != "points":
        figures.append(resolved_figure(ds, out_dir / "indices_resolved.png"))
    if "shapley_effect" in ds or "sobol_dependent_S1_full" in ds:
        figures.append(dependent_figure(ds, out_dir / "indices_dependent.png"))
    if "aggregated_pca_loading" in ds:
        figures.append(aggregated_figure(ds, out_dir / "indices_aggregated.png"))
    for name, cells in field_cells(_names(ds), input_fields or {}).items():
        figures.append(field_figure(ds, name, cells, input_fields[name], out_dir / f"indices_field_{name}.png"))
    return [f for f in figures if f is not None]




def _where(ds: xr.Dataset) -> str:
    """How :func:`~sensitivity.outputs.index_measures.shown_outputs` chose the outputs, for a figure's title."""
    if not iv.output_dims(ds):
        return ""
    plan = iv.measure_plan(ds[iv.first_measure(ds)], categories=False, max_panels=iv.MAX_SHOWN)
    if plan.kind == "points":
        return f"; first {len(plan.panels)} of {plan.total} outputs" if plan.note else ""
    return "; at the output of largest variance" + (" per panel" if plan.total > 1 else "") + plan.note


def shown_parameters(ds: xr.Dataset, index: dict[str, int] | None = None) -> tuple[xr.Dataset, str]:
    """``ds`` on the parameters its figures show (:func:`sensitivity.plots.layout.most_influential` of the first
    measure of :data:`INFLUENCE` present), and the note their titles carry: over every output, so that the figures
    of one ``indices.nc`` show the same parameters; with ``index``, at that output only (a panel of its own)."""
    measure = next((v for v in INFLUENCE if v in ds and "parameter" in ds[v].dims), None)
    if measure is None:
        return ds, ""
    magnitude = ds[measure] if index is None else ds[measure].isel(index)
    shown, note = lay.most_influential(magnitude, ds[measure].attrs.get("long_name", measure))
    return ds.isel(parameter=shown), note


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating, int, np.integer)) else str(value)


def _names(ds: xr.Dataset, axis: str = "parameter") -> list[str]:
    return [str(n) for n in ds[f"{axis}_name"].values]


# ----------------------------------------------------------------------------- figures
def bars_figure(ds: xr.Dataset, figure_path: Path) -> Path | None:
    """One panel per shown output (rows) and method (columns): bars per parameter with interval whiskers."""
    present = [m for m in iv.MEASURES if m[0] in ds]
    if not present:
        return None
    rows = iv.shown_outputs(ds)
    fig, axes = lay.grid(len(rows), len(present), size=(3.0, 2.5))
    for r, (index, label) in enumerate(rows):
        row, shown = shown_parameters(ds, index)  # each output's own most influential parameters
        names = _names(row)
        x = np.arange(len(names))
        for c, (var, interval, title) in enumerate(present):
            ax = axes[r, c]
            da = row[var].isel(index)
            value = da.transpose("parameter").values
            value = np.abs(value) if var.startswith("local") else value
            ax.bar(x, value, yerr=_whiskers(row, interval, index, value), capsize=3, color=f"C{c}")
            surrogate = _whiskers(row, f"{var}_combined_interval", index, value)
            if surrogate is not None:  # an ensemble: the interval that carries the members' spread too
                ax.errorbar(x, value, yerr=surrogate, fmt="none", ecolor="0.25", elinewidth=7, alpha=0.3)
            lay.category_ticks(ax, names)
            ax.set_title(f"{title}\n{label}" if label else title, fontsize="small")
            unit = lay.units(da)
            if unit and unit != "1":
                ax.set_ylabel(f"[{unit}]", fontsize="small")
    members = ds.sizes.get("member", 0)
    combined = f", grey: combined with the surrogate's error over {members} members" if members else ""
    shown = f"{shown}, chosen per row" if shown and len(rows) > 1 else shown
    fig.suptitle(f"sensitivity indices by method (whiskers: confidence intervals{combined}){_where(ds)}{shown}",
                 fontsize="medium")
    return lay.save(fig, figure_path)


def ranking_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Ranks of the parameters by each measure, and Kendall's tau between measures, for the first shown output."""
    index, label = iv.shown_outputs(ds)[0]
    ds, shown = shown_parameters(ds)
    measures, names = _names(ds, "measure"), _names(ds)
    rank = ds["rank"].isel(index).transpose("measure", "parameter").values
    tau = ds["kendall_tau"].isel(index).transpose("measure_i", "measure_j").values
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 0.5 * len(measures) + 3), constrained_layout=True)
    im = ax0.imshow(rank, cmap="viridis_r", aspect="auto")
    for (i, j), v in np.ndenumerate(rank):
        ax0.text(j, i, _fmt(v), ha="center", va="center", color="w", fontsize="small")
    lay.category_ticks(ax0, names)
    ax0.set_yticks(range(len(measures)), measures)
    ax0.set_title(f"parameter rank (1 = most important)\n{label}{shown}", fontsize="medium")
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
        panels += [("active_subspace", index, label) for index, label in iv.shown_outputs(ds)]
    if "active_subspace_quantity_eigenvalue" in ds:
        panels.append(("active_subspace_quantity", {"quantity": 0}, str(ds["quantity_name"].values[0])))
    fig, axes = plt.subplots(2, len(panels), figsize=(max(6.0, 4.0 * len(panels)), 6), squeeze=False,
                             constrained_layout=True)
    shown_ds, shown = shown_parameters(ds)
    names = _names(shown_ds)
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
        vector = shown_ds[f"{prefix}_eigenvector"].isel(index).isel(direction=0).transpose("parameter").values
        axes[1, c].bar(range(len(names)), vector)
        lay.category_ticks(axes[1, c], names)
        axes[1, c].set_title("leading direction w1", fontsize="medium")
    fig.suptitle(f"active subspace: eigenvalues of E[grad f grad f^T] (band: confidence interval){shown}",
                 fontsize="medium")
    return lay.save(fig, figure_path)


def resolved_figure(ds: xr.Dataset, figure_path: Path) -> Path | None:
    """Indices resolved along the model's numeric dims, laid out by :mod:`sensitivity.plots.layout`.

    A series: one row per measure and one column per label panel, a line per parameter with its
    interval band, a legend of the parameters. A field: maps of the total index (Sobol' ST, else the
    DGSM bound, Morris mu* or the activity score), one column per parameter and row per label panel.
    """
    present = [m for m in iv.MEASURES if m[0] in ds and not m[0].startswith("local")]
    if not present:  # the local method alone: its bars are the whole story
        return None
    ds, shown = shown_parameters(ds)
    names = _names(ds)
    plan = iv.measure_plan(ds[present[0][0]])
    if plan.kind == "map":
        return _total_maps(ds, plan, present, names, figure_path, shown)
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
    fig.suptitle(f"indices resolved along {lay.coord_label(ds, plan.x)} (bands: confidence intervals){plan.note}"
                 f"{shown}", fontsize="medium")
    return lay.save(fig, figure_path)


def _total_maps(ds: xr.Dataset, plan: pos.Layout, present, names: list[str], figure_path: Path, shown: str) -> Path:
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
    fig.suptitle(f"{title} over the output field, per parameter{plan.note}{shown}", fontsize="medium")
    return lay.save(fig, figure_path)


def dependent_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Grouped bars per parameter of every index of dependent inputs present, with intervals, per shown output."""
    present = [m for m in DEPENDENT if m[0] in ds]
    rows = iv.shown_outputs(ds)
    ds, shown = shown_parameters(ds)
    names = _names(ds)
    width = min(16.0, max(6.0, 0.25 * len(names) * len(present) + 2))
    fig, axes = plt.subplots(len(rows), 1, figsize=(width, 3.2 * len(rows)), squeeze=False, constrained_layout=True)
    width = 0.8 / len(present)
    for ax, (index, label) in zip(axes[:, 0], rows):
        x = np.arange(len(names))
        for k, (var, interval, legend) in enumerate(present):
            _bars(ax, x + (k - (len(present) - 1) / 2) * width, ds, var, interval, index, width, f"C{k}", legend)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xticks(x, names, rotation=45, ha="right", fontsize="small")
        ax.set_ylabel(label, fontsize="small")
    axes[0, 0].legend(fontsize="small", ncol=min(len(present), 4))
    inputs = ds.attrs.get("shapley_inputs") or ds.attrs.get("sobol_dependent_inputs", "")
    fig.suptitle(f"indices of {inputs} inputs (whiskers: confidence intervals){shown}", fontsize="medium")
    return lay.save(fig, figure_path)


def aggregated_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Aggregated indices, the variance each principal component explains, its indices, and the leading loadings.

    Dims kept by the aggregation (e.g. ``species`` when aggregated over ``day``) are shown at their first entry.
    """
    over = str(ds.attrs.get("aggregated_over", "")).split()
    kept = {d: 0 for d in ds["aggregated_variance"].dims}
    at = ", ".join(f"{d}={_fmt(ds[d].values[0]) if d in ds.coords else 0}" for d in kept)
    ds, shown = shown_parameters(ds)
    names, keys = _names(ds), [(k, label) for k, label in iv.AGGREGATED if f"aggregated_{k}" in ds]
    components = _names(ds, "component")
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6), constrained_layout=True)
    width = 0.8 / len(keys)
    for k, (key, label) in enumerate(keys):
        _bars(axes[0], np.arange(len(names)) + (k - (len(keys) - 1) / 2) * width, ds, f"aggregated_{key}",
              f"aggregated_{key}_interval", kept, width, f"C{k}", label)
    axes[0].set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize="small")
    axes[0].legend(fontsize="small")
    axes[0].set_title(f"aggregated over {', '.join(over) or 'the output'}", fontsize="medium")
    ratio = ds["aggregated_pca_explained_variance_ratio"].isel(kept).transpose("component").values
    axes[1].bar(range(len(components)), ratio, color="C7")
    axes[1].plot(range(len(components)), np.cumsum(ratio), "ko-", ms=3, label="cumulative")
    axes[1].set_xticks(range(len(components)), components)
    axes[1].set_ylim(0, 1.05)
    axes[1].legend(fontsize="small")
    axes[1].set_title("share of the variance explained", fontsize="medium")
    key = keys[-1][0]  # the total index (ST, or ST_ind with dependent inputs)
    width = 0.8 / len(components)
    for j, component in enumerate(components):
        _bars(axes[2], np.arange(len(names)) + (j - (len(components) - 1) / 2) * width, ds,
              f"aggregated_pca_{key}", f"aggregated_pca_{key}_interval", {**kept, "component": j}, width,
              f"C{j}", component)
    axes[2].set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize="small")
    axes[2].legend(fontsize="small")
    axes[2].set_title(f"{key} of each principal component", fontsize="medium")
    _loadings(axes[3], ds["aggregated_pca_loading"].isel(kept), over, components, fig)
    fig.suptitle("aggregated and PCA-based indices" + (f" at {at}" if at else "") + shown, fontsize="medium")
    return lay.save(fig, figure_path)


def _loadings(ax: plt.Axes, loading: xr.DataArray, over: list[str], components: list[str], fig: plt.Figure) -> None:
    """Principal directions over one dim (lines, bars for labels) or the leading one over two (a map)."""
    if len(over) == 2:  # one cell per output; each axis ticked with its labels or coordinate values
        im = ax.imshow(loading.isel(component=0).transpose(*over).values, origin="lower", cmap="RdBu_r",
                       aspect="auto")
        for axis, dim in ((ax.xaxis, over[1]), (ax.yaxis, over[0])):
            values = loading[f"{dim}_name"].values if f"{dim}_name" in loading.coords else \
                loading[dim].values if dim in loading.coords else np.arange(loading.sizes[dim])
            step = max(1, len(values) // 8)
            axis.set_ticks(range(0, len(values), step), [_fmt(v) for v in values[::step]])
        ax.set_xlabel(over[1])
        ax.set_ylabel(over[0])
        fig.colorbar(im, ax=ax, shrink=0.8)
        ax.set_title(f"{components[0]} loading", fontsize="medium")
        return
    dim = over[0] if over else None
    labels = f"{dim}_name" in loading.coords
    size = loading.sizes[dim] if dim is not None else 1
    t = loading[dim].values if dim is not None and not labels and dim in loading.coords else np.arange(size)
    for j, component in enumerate(components):
        ax.plot(t, loading.isel(component=j).transpose(*over).values.ravel(), "o-" if labels else "-", ms=3,
                label=component)
    if labels:
        ax.set_xticks(t, [str(v) for v in loading[f"{dim}_name"].values], rotation=45, ha="right", fontsize="small")
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(fontsize="small")
    ax.set_xlabel(dim or "")
    ax.set_title("principal directions", fontsize="medium")


def _bars(ax: plt.Axes, x: np.ndarray, ds: xr.Dataset, var: str, interval: str, index: dict[str, int], width: float,
          color: str, label: str) -> None:
    """Bars of ``var`` per parameter at ``index``, with whiskers from ``interval`` when the dataset has it."""
    value = ds[var].isel(index).transpose("parameter").values
    ax.bar(x, value, width, yerr=_whiskers(ds, interval, index, value), capsize=2, color=color, label=label)


def _whiskers(ds: xr.Dataset, interval: str | None, index: dict[str, int], value: np.ndarray) -> np.ndarray | None:
    """``[2, n_parameter]`` distances of ``interval``'s bounds below and above ``value`` (None without it)."""
    if interval is None or interval not in ds:
        return None
    low, high = ds[interval].isel(index).transpose("parameter", "bound").values.T
    return np.vstack([np.clip(value - low, 0, None), np.clip(high - value, 0, None)])
