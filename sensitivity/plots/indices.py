"""Figures of sensitivity indices (``indices.nc``): bars with intervals per method, ranking comparison,
active-subspace spectrum, indices resolved along a time series (or mapped over a field), the indices of
dependent inputs side by side (Shapley effects, full and independent Sobol' indices), and the aggregated
and PCA-based indices of a whole output."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

#: Per-output importance measures, in panel order: (variable, its interval or None, panel title).
MEASURES: tuple[tuple[str, str | None, str], ...] = (
    ("sobol_S1", "sobol_S1_interval", "Sobol' first order S1"),
    ("sobol_ST", "sobol_ST_interval", "Sobol' total ST"),
    ("dgsm_sobol_total_bound", "dgsm_sobol_total_bound_interval", "DGSM bound on ST"),
    ("morris_mu_star", "morris_mu_star_interval", "Morris mu*"),
    ("active_subspace_activity_score", None, "activity score"),
    ("local_sigma_normalized", None, "|sigma-normalised derivative| at nominal"),
    ("shapley_effect", "shapley_effect_interval", "Shapley effect"),
    ("sobol_dependent_S1_full", "sobol_dependent_S1_full_interval", "full first order (dependent)"),
    ("sobol_dependent_ST_ind", "sobol_dependent_ST_ind_interval", "independent total (dependent)"),
    ("given_data_S1", "given_data_S1_interval", "given-data S1"),
)
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
#: The aggregated indices, in bar order: (suffix of ``aggregated_`` and ``aggregated_pca_``, label).
AGGREGATED: tuple[tuple[str, str], ...] = (("S1", "S1"), ("ST", "ST"), ("S1_full", "S1 full"), ("ST_full", "ST full"),
                                           ("S1_ind", "S1 independent"), ("ST_ind", "ST independent"))
#: Dims that are never the model's output dims.
NON_OUTPUT = {"parameter", "bound", "sample", "direction", "group", "n_samples", "measure", "measure_i", "measure_j",
              "parameter_i", "parameter_j", "component"}
MAX_NAMED = 4


def indices_figures(path: str | Path, out_dir: str | Path) -> list[Path]:
    """Write every figure that ``indices.nc`` supports into ``out_dir``; return their paths.

    ``indices_bars.png`` and ``indices_ranking.png`` always (when the methods exist),
    ``indices_active_subspace.png`` with active subspaces, ``indices_resolved.png``
    for a time-series output (lines along time) or a field (maps of the total index),
    ``indices_dependent.png`` with Shapley effects or dependent Sobol' indices, and
    ``indices_aggregated.png`` with aggregated indices.
    """
    out_dir = Path(out_dir)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    figures = [bars_figure(ds, out_dir / "indices_bars.png")]
    if "rank" in ds:
        figures.append(ranking_figure(ds, out_dir / "indices_ranking.png"))
    if "active_subspace_eigenvalue" in ds or "active_subspace_quantity_eigenvalue" in ds:
        figures.append(active_subspace_figure(ds, out_dir / "indices_active_subspace.png"))
    if len(output_dims(ds)) in (1, 2) and output_dims(ds) != ["output"]:
        figures.append(resolved_figure(ds, out_dir / "indices_resolved.png"))
    if "shapley_effect" in ds or "sobol_dependent_S1_full" in ds:
        figures.append(dependent_figure(ds, out_dir / "indices_dependent.png"))
    if "aggregated_pca_loading" in ds:
        figures.append(aggregated_figure(ds, out_dir / "indices_aggregated.png"))
    return [f for f in figures if f is not None]


# ----------------------------------------------------------------------------- selection
def output_dims(ds: xr.Dataset) -> list[str]:
    """The model's own output dims in ``ds`` (``["output"]`` for named scalars, e.g. ``["day"]`` for the SEIR demo)."""
    for name in [m[0] for m in MEASURES] + ["dgsm_nu", "active_subspace_eigenvalue"]:
        if name in ds:
            return [d for d in ds[name].dims if d not in NON_OUTPUT]
    return []


def shown_outputs(ds: xr.Dataset) -> list[tuple[dict[str, int], str]]:
    """Which outputs the bar and ranking figures show: ``(isel, label)`` pairs.

    Named scalars: the first :data:`MAX_NAMED`. A series or a field: the element with the
    largest output variance (the most informative one to rank parameters on).
    """
    dims = output_dims(ds)
    if dims == ["output"]:
        names = [str(n) for n in ds["output_name"].values]
        return [({"output": k}, names[k]) for k in range(min(len(names), MAX_NAMED))]
    if not dims:
        return [({}, "")]
    variance = next((ds[v] for v in ("sobol_variance", "dgsm_variance", "sobol_dependent_variance", "shapley_variance",
                                     "given_data_variance") if v in ds), None)
    if variance is None:
        index = {d: ds.sizes[d] // 2 for d in dims}
    else:
        flat = int(np.nanargmax(np.nan_to_num(variance.transpose(*dims).values, nan=-np.inf)))
        index = dict(zip(dims, (int(i) for i in np.unravel_index(flat, [ds.sizes[d] for d in dims]))))
    label = ", ".join(f"{d}={_fmt(ds[d].values[i]) if d in ds.coords else i}" for d, i in index.items())
    return [(index, f"largest variance at {label}")]


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating, int, np.integer)) else str(value)


def _names(ds: xr.Dataset, axis: str = "parameter") -> list[str]:
    return [str(n) for n in ds[f"{axis}_name"].values]


# ----------------------------------------------------------------------------- figures
def bars_figure(ds: xr.Dataset, figure_path: Path) -> Path | None:
    """One panel per method (columns) and shown output (rows): bars per parameter with interval whiskers."""
    present = [m for m in MEASURES if m[0] in ds]
    if not present:
        return None
    rows = shown_outputs(ds)
    names = _names(ds)
    fig, axes = plt.subplots(len(rows), len(present), figsize=(3.2 * len(present), 2.8 * len(rows)),
                             squeeze=False, constrained_layout=True)
    x = np.arange(len(names))
    for r, (index, label) in enumerate(rows):
        for c, (var, interval, title) in enumerate(present):
            ax = axes[r, c]
            value = ds[var].isel(index).transpose("parameter").values
            value = np.abs(value) if var.startswith("local") else value
            err = None
            if interval is not None and interval in ds:
                low, high = ds[interval].isel(index).transpose("parameter", "bound").values.T
                err = np.vstack([np.clip(value - low, 0, None), np.clip(high - value, 0, None)])
            ax.bar(x, value, yerr=err, capsize=3, color=f"C{c}")
            ax.set_xticks(x, names, rotation=45, ha="right", fontsize="small")
            ax.set_title(title if r == 0 else "", fontsize="medium")
            if c == 0:
                ax.set_ylabel(label, fontsize="small")
    fig.suptitle("sensitivity indices by method (whiskers: confidence intervals)")
    return _save(fig, figure_path)


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
    ax0.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax0.set_yticks(range(len(measures)), measures)
    ax0.set_title(f"parameter rank (1 = most important), {label}", fontsize="medium")
    fig.colorbar(im, ax=ax0)
    im = ax1.imshow(tau, cmap="RdBu", vmin=-1, vmax=1)
    ax1.set_xticks(range(len(measures)), measures, rotation=45, ha="right")
    ax1.set_yticks(range(len(measures)), measures)
    ax1.set_title("Kendall tau-b between rankings", fontsize="medium")
    fig.colorbar(im, ax=ax1)
    return _save(fig, figure_path)


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
        axes[1, c].set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize="small")
        axes[1, c].set_title("leading direction w1", fontsize="medium")
    fig.suptitle("active subspace: eigenvalues of E[grad f grad f^T] (band: confidence interval)", fontsize="medium")
    return _save(fig, figure_path)


def resolved_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Indices along a time series (lines per parameter with interval bands), or maps of ST over a field."""
    dims = output_dims(ds)
    present = [m for m in MEASURES if m[0] in ds and not m[0].startswith("local")]
    names = _names(ds)
    if len(dims) == 1:
        (dim,) = dims
        t = ds[dim].values if dim in ds.coords else np.arange(ds.sizes[dim])
        fig, axes = plt.subplots(len(present), 1, figsize=(9, 2.4 * len(present)), sharex=True, squeeze=False,
                                 constrained_layout=True)
        for ax, (var, interval, title) in zip(axes[:, 0], present):
            for j, name in enumerate(names):
                line, = ax.plot(t, ds[var].isel(parameter=j).transpose(dim).values, label=name)
                if interval is not None and interval in ds:
                    band = ds[interval].isel(parameter=j).transpose("bound", dim).values
                    ax.fill_between(t, band[0], band[1], color=line.get_color(), alpha=0.2)
            ax.set_title(title, fontsize="medium")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=min(len(names), 6), fontsize="small")
        axes[-1, 0].set_xlabel(f"{dim} [{ds[dim].attrs.get('units', '')}]" if dim in ds.coords else dim)
        fig.suptitle(f"indices resolved along {dim} (bands: confidence intervals)")
        return _save(fig, figure_path)
    var = next(m[0] for m in present if m[0] in ("sobol_ST", "dgsm_sobol_total_bound", "morris_mu_star",
                                                 "active_subspace_activity_score", "shapley_effect",
                                                 "sobol_dependent_ST_ind", "given_data_S1"))
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.2), squeeze=False, constrained_layout=True)
    for j, name in enumerate(names):
        im = axes[0, j].imshow(ds[var].isel(parameter=j).transpose(*dims).values, origin="lower", cmap="viridis")
        axes[0, j].set_title(name, fontsize="medium")
        axes[0, j].set_xlabel(dims[1])
        axes[0, j].set_ylabel(dims[0])
        fig.colorbar(im, ax=axes[0, j], shrink=0.8)
    fig.suptitle(f"{var} over the output field")
    return _save(fig, figure_path)


def dependent_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Grouped bars per parameter of every index of dependent inputs present, with intervals, per shown output."""
    present = [m for m in DEPENDENT if m[0] in ds]
    rows = shown_outputs(ds)
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
    fig.suptitle(f"indices of {inputs} inputs (whiskers: confidence intervals)", fontsize="medium")
    return _save(fig, figure_path)


def aggregated_figure(ds: xr.Dataset, figure_path: Path) -> Path:
    """Aggregated indices, the variance each principal component explains, its indices, and the leading loadings.

    Dims kept by the aggregation (e.g. ``species`` when aggregated over ``day``) are shown at their first entry.
    """
    over = str(ds.attrs.get("aggregated_over", "")).split()
    kept = {d: 0 for d in ds["aggregated_variance"].dims}
    at = ", ".join(f"{d}={_fmt(ds[d].values[0]) if d in ds.coords else 0}" for d in kept)
    names, keys = _names(ds), [(k, label) for k, label in AGGREGATED if f"aggregated_{k}" in ds]
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
    fig.suptitle("aggregated and PCA-based indices" + (f" at {at}" if at else ""), fontsize="medium")
    return _save(fig, figure_path)


def _loadings(ax: plt.Axes, loading: xr.DataArray, over: list[str], components: list[str], fig: plt.Figure) -> None:
    """Principal directions over one dim (lines, bars for labels) or the leading one over two (a map)."""
    if len(over) == 2:
        numeric = all(d in loading.coords and loading[d].dtype.kind in "iuf" for d in over)
        extent = [*loading[over[1]].values[[0, -1]], *loading[over[0]].values[[0, -1]]] if numeric else None
        im = ax.imshow(loading.isel(component=0).transpose(*over).values, origin="lower", cmap="RdBu_r",
                       extent=extent, aspect="auto")
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
    err = None
    if interval in ds:
        low, high = ds[interval].isel(index).transpose("parameter", "bound").values.T
        err = np.vstack([np.clip(value - low, 0, None), np.clip(high - value, 0, None)])
    ax.bar(x, value, width, yerr=err, capsize=2, color=color, label=label)


def _save(fig: plt.Figure, figure_path: Path) -> Path:
    figure_path = Path(figure_path)
    fig.savefig(figure_path, dpi=100)
    plt.close(fig)
    return figure_path
