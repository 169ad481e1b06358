"""Figures of an uncertainty propagation: output bands per method, and where the linear answer fails."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

#: Up to this many named scalar outputs are drawn as points with error bars; more, or a series, as lines and bands.
_MAX_POINTS = 24


def _output_axis(ds: xr.Dataset) -> tuple[np.ndarray, str | None]:
    """Positions along the flat output axis and their label: the model's own 1-D coordinate (e.g.
    ``day(output)``), else the index (label None)."""
    own = [name for name, c in ds.coords.items()
           if c.dims == ("output",) and name not in ("output",) and not name.startswith("output_")
           and np.issubdtype(c.dtype, np.number)]
    if len(own) == 1:
        c = ds[own[0]]
        units = c.attrs.get("units")
        return c.values.astype(float), f"{c.attrs.get('long_name', own[0])}" + (f" [{units}]" if units else "")
    return np.arange(ds.sizes["output"], dtype=float), None


def _band(ds: xr.Dataset, i: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Lowest and highest reported quantile of method ``i`` and the band's probability."""
    q = ds["output_quantile"].isel(propagation_method=i)
    p = ds["quantile"].values
    low, high = q.isel(quantile=int(np.argmin(p))).values, q.isel(quantile=int(np.argmax(p))).values
    return low, high, float(p.max() - p.min())


def propagation_figure(path: str | Path, figure_path: str | Path) -> Path:
    """Output mean and quantile band per method along the output axis, and the nonlinearity verdict.

    Parameters
    ----------
    path
        A ``propagation.nc`` file.
    figure_path
        Where to write the PNG.

    Returns
    -------
    Path
        ``figure_path``. Top: the mean of each method with the band between its lowest and highest
        quantile (normal approximation for the moment methods, sample quantiles for Monte Carlo and the
        posterior predictive). Bottom: ``max(|mean gap|, |std gap|)`` of each method against the verdict's
        reference (the posterior predictive when present, else Monte Carlo), in the reference's std, with
        the outputs flagged nonlinear marked.
    """
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    own = [d for d in ds["output_mean"].dims if d != "propagation_method"]
    if own != ["output"]:  # the model's own dims: one flat axis for this figure
        ds = ds.drop_dims([d for d in ("output_i", "output_j") if d in ds.dims]).stack(output=own)
        names = [",".join(map(str, key)) for key in ds["output"].values]
        ds = ds.drop_vars(["output", *own]).assign_coords(output=np.arange(len(names)), output_name=("output", names))
    x, xlabel = _output_axis(ds)
    names = [str(n) for n in ds["propagation_method_name"].values]
    units = ds["output_mean"].attrs.get("units", "")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, constrained_layout=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    few = xlabel is None and len(x) <= _MAX_POINTS  # named scalars: points; a series or a field: lines
    width = 0.6 * (np.min(np.diff(x)) if len(x) > 1 else 1.0) / max(len(names), 1)
    for i, name in enumerate(names):
        mean = ds["output_mean"].isel(propagation_method=i).values
        low, high, prob = _band(ds, i)
        if few:
            shift = (i - (len(names) - 1) / 2) * width
            top.errorbar(x + shift, mean, yerr=[mean - low, high - mean], fmt="o", capsize=3, label=name)
        else:
            line, = top.plot(x, mean, label=name)
            top.fill_between(x, low, high, color=line.get_color(), alpha=0.15)
    quantity = ds.attrs.get("output_long_name") or "output"
    top.set_ylabel(f"{quantity} [{units}]" if units else quantity)
    top.set_title(f"mean and {prob:.0%} band per method")
    top.legend(fontsize="small")
    _verdict_panel(bottom, ds, x, names, few)
    bottom.set_xlabel(xlabel or "output")
    if xlabel is None and few:
        bottom.set_xticks(x, [str(n) for n in ds["output_name"].values], rotation=30, ha="right")
    figure_path = Path(figure_path)
    fig.savefig(figure_path, dpi=110)
    plt.close(fig)
    return figure_path


def _verdict_panel(ax: plt.Axes, ds: xr.Dataset, x: np.ndarray, names: list[str], few: bool) -> None:
    """Disagreement of each method with the verdict's reference; flagged outputs marked with a cross."""
    reference = ds["nonlinear"].attrs.get("verdict_reference", "monte_carlo")
    gap = np.fmax(np.abs(ds["output_mean_discrepancy"].values), np.abs(ds["output_std_discrepancy"].values))
    flags = ds["nonlinear"].values
    shown = False
    for i, name in enumerate(names):
        if (flags[i] < 0).all():
            continue
        line, = ax.plot(x, gap[i], "o-" if few else "-", label=name, markersize=4)
        bad = flags[i] == 1
        ax.plot(x[bad], gap[i][bad], "x", color=line.get_color(), markersize=9 if few else 4, markeredgewidth=1.5)
        shown = True
    if not shown:
        ax.text(0.5, 0.5, f"no verdict: {reference} is not among the methods (or it failed)", ha="center",
                va="center", transform=ax.transAxes)
        return
    flagged = {name: int((flags[i] == 1).sum()) for i, name in enumerate(names) if (flags[i] >= 0).any()}
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylabel(f"|method - {reference}| / its std")
    counts = ", ".join(f"{k}: {v}/{flags.shape[1]}" for k, v in flagged.items())
    ax.set_title(f"nonlinearity verdict (x: flagged) - {counts}")
    ax.legend(fontsize="small")
