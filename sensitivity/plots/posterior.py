"""Figures of a posterior sample: pair plot with the Laplace ellipses, and trace plot."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from scipy import stats

from sensitivity.plots import layout as lay

#: Draws shown per panel of the pair plot (thinned evenly over chains and draws).
MAX_POINTS = 2000


def posterior_figures(path: str | Path, out_dir: str | Path) -> list[Path]:
    """``posterior_pairs.png`` and ``posterior_trace.png`` of a ``posterior.nc``, written to ``out_dir``."""
    out_dir = Path(out_dir)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    return [pair_figure(ds, out_dir / "posterior_pairs.png"), trace_figure(ds, out_dir / "posterior_trace.png")]


def shown_parameters(ds: xr.Dataset) -> tuple[np.ndarray, str]:
    """The parameters both figures show, in input order, and the note their titles carry.

    Every parameter up to :data:`sensitivity.plots.layout.MAX_PARAMETERS`; past it (64 of a field), the
    ones slowest to mix, of smallest ESS (the least of bulk and tail; NaN first): the traces a reader must check,
    and the pairs whose geometry slows the chains. A pair plot of every one of 64 parameters is 4,096 panels.
    """
    n, limit = ds.sizes["parameter"], lay.MAX_PARAMETERS
    if n <= limit:
        return np.arange(n), ""
    ess = np.minimum(ds["ess_bulk"].values, ds["ess_tail"].values)
    slowest = np.argsort(np.nan_to_num(ess, nan=-np.inf), kind="stable")[:limit]
    return np.sort(slowest), f"; the {limit} of {n} parameters of smallest ESS (slowest to mix)"


def _labels(ds: xr.Dataset) -> list[str]:
    units = ds["parameter_units"].values if "parameter_units" in ds.coords else [""] * ds.sizes["parameter"]
    return [f"{n} [{u}]" if u else str(n) for n, u in zip(ds["parameter_name"].values, units)]


def pair_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """Histograms on the diagonal, draws below it (of the kept chains: a stuck one is not the posterior), with the
    Laplace mean and its 95 % ellipse per pair."""
    shown, note = shown_parameters(ds)
    kept = ds["chain_kept"].values == 1 if "chain_kept" in ds else np.ones(ds.sizes["chain"], bool)
    draws = ds["draws"].values[kept].reshape(-1, ds.sizes["parameter"])[:, shown]
    show = draws[np.linspace(0, len(draws) - 1, min(MAX_POINTS, len(draws))).astype(int)]
    mean, cov = ds["laplace_mean"].values[shown], ds["laplace_covariance"].values[np.ix_(shown, shown)]
    n, labels = draws.shape[1], [_labels(ds)[k] for k in shown]
    radius = np.sqrt(stats.chi2.ppf(0.95, 2))
    fig, axes = plt.subplots(n, n, figsize=(2.0 * n + 1, 2.0 * n + 1), constrained_layout=True, squeeze=False)
    for i in range(n):
        for j in range(n):
            ax = axes[i, j]
            if j > i:
                ax.set_axis_off()
                continue
            if i == j:
                ax.hist(draws[:, i], bins=40, density=True, color="C0", alpha=0.6)
                if np.isfinite(cov[i, i]):
                    grid = np.linspace(*np.quantile(draws[:, i], [0.001, 0.999]), 200)
                    ax.plot(grid, stats.norm.pdf(grid, mean[i], np.sqrt(cov[i, i])), color="C1")
                ax.set_yticks([])
            else:
                ax.plot(show[:, j], show[:, i], ".", ms=1.5, color="C0", alpha=0.4)
                block = cov[np.ix_([j, i], [j, i])]
                if np.all(np.isfinite(block)):
                    w, v = np.linalg.eigh(block)
                    t = np.linspace(0, 2 * np.pi, 200)
                    circle = np.sqrt(np.maximum(w, 0))[:, None] * [np.cos(t), np.sin(t)]
                    ring = mean[[j, i], None] + radius * v @ circle
                    ax.plot(ring[0], ring[1], color="C1", lw=1.2)
                    ax.plot(mean[j], mean[i], "+", color="C1")
            if i == n - 1:
                ax.set_xlabel(labels[j], fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(labels[i], fontsize=8)
            ax.tick_params(labelsize=6)
    fig.suptitle(f"posterior draws ({ds.sizes['chain']} chains x {ds.sizes['draw']}) and the Laplace\n"
                 f"approximation (orange: mean, 95 % ellipse, normal density){note}", fontsize=9)
    return lay.save(fig, figure_path)


def trace_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """Every chain's draws per parameter, divergent transitions marked, R-hat and ESS in the titles."""
    shown, note = shown_parameters(ds)
    n, labels = len(shown), _labels(ds)
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.6 * n + 0.6), sharex=True, constrained_layout=True, squeeze=False)
    draws, divergent = ds["draws"].values, ds["divergent"].values.astype(bool)
    for j, ax in zip(shown, axes[:, 0]):
        for c in range(ds.sizes["chain"]):
            ax.plot(draws[c, :, j], lw=0.4, alpha=0.7)
            d = np.flatnonzero(divergent[c])
            ax.plot(d, draws[c, d, j], "|", color="red", ms=6)
        ax.set_ylabel(labels[j], fontsize=7)
        ax.set_title(f"R-hat {float(ds['rhat'][j]):.3f}, ESS bulk {float(ds['ess_bulk'][j]):.0f}, "
                     f"tail {float(ds['ess_tail'][j]):.0f}", fontsize=7, loc="right")
        ax.tick_params(labelsize=6)
    axes[-1, 0].set_xlabel("draw (after warm-up)")
    fig.suptitle(f"trace of {ds.sizes['chain']} chains; red ticks: divergent transitions ({int(ds['n_divergent'])})"
                 f"{note}", fontsize=9)
    return lay.save(fig, figure_path)
