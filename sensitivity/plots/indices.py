"""Figures of sensitivity indices (``indices.nc``): bars with intervals per method, ranking comparison,
active-subspace spectrum, and indices resolved along a time series (or mapped over a field)."""
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
)
#: Dims that are never the model's output dims.
NON_OUTPUT = {"parameter", "bound", "sample", "direction", "group", "n_samples", "measure", "measure_i", "measure_j",
              "parameter_i", "parameter_j"}
MAX_NAMED = 4


def indices_figures(path: str | Path, out_dir: str | Path) -> list[Path]:
    """Write every figure that ``indices.nc`` supports into ``out_dir``; return their paths.

    ``indices_bars.png`` and ``indices_ranking.png`` always (when the methods exist),
    ``indices_active_subspace.png`` with active subspaces, and ``indices_resolved.png``
    for a time-series output (lines along time) or a field (maps of the total index).
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
    variance = next((ds[v] for v in ("sobol_variance", "dgsm_variance") if v in ds), None)
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
                                                 "active_subspace_activity_score"))
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.2), squeeze=False, constrained_layout=True)
    for j, name in enumerate(names):
        im = axes[0, j].imshow(ds[var].isel(parameter=j).transpose(*dims).values, origin="lower", cmap="viridis")
        axes[0, j].set_title(name, fontsize="medium")
        axes[0, j].set_xlabel(dims[1])
        axes[0, j].set_ylabel(dims[0])
        fig.colorbar(im, ax=axes[0, j], shrink=0.8)
    fig.suptitle(f"{var} over the output field")
    return _save(fig, figure_path)


def _save(fig: plt.Figure, figure_path: Path) -> Path:
    figure_path = Path(figure_path)
    fig.savefig(figure_path, dpi=100)
    plt.close(fig)
    return figure_path
