"""Figures of a reliability analysis: fragility curves with intervals, importance-factor bars, design points.

All read a dataset of :func:`sensitivity.analyses.reliability.reliability` on any output shape: its picked
outputs (the dims after ``threshold``) are flattened, and at most :data:`MAX_CURVES` of them, evenly spaced,
are drawn, each labeled by its coordinates.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

#: Most picked outputs drawn in one figure.
MAX_CURVES = 6
#: Most input pairs (panels) of the design points figure.
MAX_PAIRS = 3
METHOD = "reliability_method"


def _outputs(ds: xr.Dataset) -> tuple[list[str], list[int]]:
    """The picked outputs' dims and the flat indices of the ones drawn."""
    dims = [d for d in ds["form_beta"].dims if d != "threshold"]
    size = int(np.prod([ds.sizes[d] for d in dims], dtype=int))
    return dims, sorted(set(np.linspace(0, size - 1, min(size, MAX_CURVES)).round().astype(int).tolist()))


def _label(ds: xr.Dataset, dims: list[str], flat: int) -> str:
    if not dims:
        return ""
    where = np.unravel_index(flat, [ds.sizes[d] for d in dims])
    parts = []
    for d, i in zip(dims, where):
        coord = ds[f"{d}_name"] if f"{d}_name" in ds.coords else ds[d]
        parts.append(f"{d}={coord.values[i]}")
    return ", ".join(parts)


def _flat(var: xr.DataArray, dims: list[str]) -> np.ndarray:
    """``var`` with the picked outputs' dims last, flattened: ``[..., outputs]``."""
    values = var.transpose(..., *dims).values
    return values.reshape(*values.shape[: values.ndim - len(dims)], -1)


def fragility_figure(ds: xr.Dataset, path: str | Path) -> Path:
    """Pf against the threshold per method (log scale), with each sampling method's interval as a band and, on
    an ensemble, the combined interval; one panel per drawn output. Returns ``path``."""
    import matplotlib.pyplot as plt

    dims, drawn = _outputs(ds)
    t = ds["threshold"].values
    names = [str(v) for v in ds[f"{METHOD}_name"].values]
    pf = _flat(ds["pf"].transpose(METHOD, "threshold", ...), dims)  # [method, threshold, outputs]
    band = _flat(ds["pf_interval"].transpose(METHOD, "threshold", "bound", ...), dims)
    cols = min(len(drawn), 3)
    rows = -(-len(drawn) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, k in zip(axes.ravel(), drawn):
        for i, name in enumerate(names):
            line, = ax.plot(t, pf[i, :, k], marker="o", ms=3, label=name)
            if np.isfinite(band[i, :, :, k]).any():
                ax.fill_between(t, band[i, :, 0, k], band[i, :, 1, k], color=line.get_color(), alpha=0.2)
        if "pf_combined_interval" in ds:
            both = _flat(ds["pf_combined_interval"].transpose("threshold", "bound", ...), dims)
            ax.fill_between(t, both[:, 0, k], both[:, 1, k], color="grey", alpha=0.2, label="with surrogate spread")
        ax.set_yscale("log")
        ax.set_xlabel(f"threshold [{ds['threshold'].attrs.get('units', '1')}]")
        ax.set_ylabel(f"P(output {'>' if ds.attrs.get('direction') == 'above' else '<'} threshold)")
        ax.set_title(_label(ds, dims, k), fontsize=9)
    for ax in axes.ravel()[len(drawn):]:
        ax.set_visible(False)
    axes.ravel()[0].legend(fontsize=7)
    fig.suptitle("Fragility curves")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def importance_figure(ds: xr.Dataset, path: str | Path) -> Path:
    """Importance factors ``alpha^2`` at the most probable design point, per parameter: one group of bars per
    drawn output, at the middle threshold. Returns ``path``."""
    import matplotlib.pyplot as plt

    dims, drawn = _outputs(ds)
    middle = ds.sizes["threshold"] // 2
    at = ds["importance"].isel(threshold=middle, design_point=0).transpose("parameter", ...)
    values = _flat(at, dims)  # [parameter, outputs]
    names = [str(v) for v in ds["parameter_name"].values]
    width = 0.8 / len(drawn)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(names) + 2), 3.4))
    for j, k in enumerate(drawn):
        ax.bar(np.arange(len(names)) + (j - (len(drawn) - 1) / 2) * width, values[:, k], width,
               label=_label(ds, dims, k) or None)
    ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("importance factor alpha^2")
    ax.set_title(f"Importance at the design point, threshold {ds['threshold'].values[middle]:g} "
                 f"{ds['threshold'].attrs.get('units', '')}", fontsize=10)
    if any(_label(ds, dims, k) for k in drawn):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def important_pairs(ds: xr.Dataset, count: int = MAX_PAIRS) -> list[tuple[int, int]]:
    """The ``count`` input pairs of the largest summed importance factor (over every event's most probable
    design point), as parameter positions, most important first."""
    total = np.nan_to_num(ds["importance"].isel(design_point=0).transpose("parameter", ...).values)
    total = total.reshape(ds.sizes["parameter"], -1).sum(axis=1)
    n = len(total)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    return sorted(pairs, key=lambda p: -(total[p[0]] + total[p[1]]))[:count]


def design_point_figure(ds: xr.Dataset, path: str | Path) -> Path:
    """The most probable design points in the standard space over the most important input pairs
    (:func:`important_pairs`): per drawn output, the design points of every threshold joined in threshold order,
    and at the middle threshold the limit state as FORM linearises it (the tangent ``alpha . u = beta`` through
    the design point, the other inputs held at theirs); circles of radius ``beta`` around the origin. Returns
    ``path``."""
    import matplotlib.pyplot as plt

    dims, drawn = _outputs(ds)
    names = [str(v) for v in ds["parameter_name"].values]
    u = _flat(ds["design_u"].isel(design_point=0).transpose("threshold", "parameter", ...), dims)  # [T, n, out]
    alpha = _flat(ds["alpha"].isel(design_point=0).transpose("threshold", "parameter", ...), dims)
    middle = ds.sizes["threshold"] // 2
    pairs = important_pairs(ds) if len(names) > 1 else []
    fig, axes = plt.subplots(1, max(len(pairs), 1), figsize=(4.2 * max(len(pairs), 1), 4.0), squeeze=False)
    for ax, (i, j) in zip(axes.ravel(), pairs):
        reach = 1.0
        for k in drawn:
            line, = ax.plot(u[:, i, k], u[:, j, k], marker="o", ms=3, label=_label(ds, dims, k) or None)
            ui, uj, ai, aj = u[middle, i, k], u[middle, j, k], alpha[middle, i, k], alpha[middle, j, k]
            if np.all(np.isfinite([ui, uj, ai, aj])) and np.hypot(ai, aj) > 0:
                s = np.linspace(-2.0, 2.0, 2) / np.hypot(ai, aj)
                ax.plot(ui - aj * s, uj + ai * s, color=line.get_color(), ls="--", lw=1)
            finite = np.abs(u[:, [i, j], k][np.isfinite(u[:, [i, j], k])])
            reach = max(reach, float(finite.max()) if finite.size else 0.0)
        for b in np.unique(np.round(np.nan_to_num(np.abs(ds["form_beta"].values.ravel())), 1))[-3:]:
            ax.add_patch(plt.Circle((0, 0), b, fill=False, color="grey", lw=0.5, ls=":"))
        lim = 1.2 * reach
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.plot(0, 0, "k+")
        ax.set_xlabel(f"u[{names[i]}]")
        ax.set_ylabel(f"u[{names[j]}]")
    if not pairs:
        axes[0, 0].set_visible(False)
    if any(_label(ds, dims, k) for k in drawn) and pairs:
        axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"Design points (standard space; dashed: the linearised limit state at threshold "
                 f"{ds['threshold'].values[middle]:g} {ds['threshold'].attrs.get('units', '')})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def reliability_figures(ds: xr.Dataset, out_dir: str | Path) -> list[Path]:
    """The figures of ``ds`` into ``out_dir``: ``reliability_fragility.png``, ``reliability_importance.png``,
    ``reliability_design_points.png``."""
    out = Path(out_dir)
    return [fragility_figure(ds, out / "reliability_fragility.png"),
            importance_figure(ds, out / "reliability_importance.png"),
            design_point_figure(ds, out / "reliability_design_points.png")]
