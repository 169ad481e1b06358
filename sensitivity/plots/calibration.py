"""Figures of a calibration (fit with its band, convergence, correlation) and of its step maps (sweep, 2-D slice)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay

#: At most this many starts are drawn in the convergence figure (the lowest-cost ones first).
MAX_STARTS = 200


def calibration_figures(path: str | Path, out_dir: str | Path) -> list[Path]:
    """``calibration_fit.png``, ``calibration_convergence.png`` and ``calibration_correlation.png`` of a
    ``calibration.nc`` file, written to ``out_dir``; of an ensemble's calibration (``estimate_combined_interval``),
    ``calibration_estimates.png`` too (:func:`estimates_figure`)."""
    out_dir = Path(out_dir)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    figures = [fit_figure(ds, out_dir / "calibration_fit.png"),
               correlation_figure(ds, out_dir / "calibration_correlation.png")]
    if "history_cost" in ds:
        figures.insert(1, convergence_figure(ds, out_dir / "calibration_convergence.png"))
    if "estimate_combined_interval" in ds:
        figures.append(estimates_figure(ds, out_dir / "calibration_estimates.png"))
    return figures


def _best(ds: xr.Dataset) -> int:
    best = int(ds["best_start"])
    return best if best >= 0 else int(np.nanargmin(ds["cost"].values)) if np.isfinite(ds["cost"].values).any() else 0


def fit_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """Observations with their standard deviation, the best fit and its delta-method band.

    Laid out by :mod:`sensitivity.plots.layout`: per label panel, a series against its coordinate
    (observations as error bars, the fit as a line in its band); named scalars side by side; a 2-D
    field as three maps per label panel (observed, best fit, observed - best fit).
    """
    best = ds.isel(start=_best(ds))
    obs = ds["y_obs"]
    plan = pos.plan(obs, pos.output_dims(obs), shown=obs.notnull())
    low, high = _bounds(best["prediction_band"])
    level = ds["prediction_band"].attrs.get("long_name", "band").split(" ")[0]
    quantity = ds.attrs.get("output_long_name", "output")
    title = f"best of {ds.sizes['start']} starts: reduced chi2 {float(best['reduced_chi2']):.3g}"
    if plan.kind == "map":
        return _field_fit(obs, best["model_output"], plan, quantity, title, figure_path)
    fig, axes = lay.wrapped(len(plan.panels))
    for ax, panel in zip(axes, plan.panels):
        x = lay.x_positions(obs, plan, panel)
        y, std = lay.along_x(obs, plan, panel), lay.along_x(ds["observation_std"], plan, panel)
        fit, lo, hi = (lay.along_x(v, plan, panel) for v in (best["model_output"], low, high))
        if plan.kind == "lines":
            ax.fill_between(x, lo, hi, color="C1", alpha=0.3, label=f"{level} delta-method band of the fit")
            ax.plot(x, fit, color="C1", label="best fit")
        else:
            ax.errorbar(x + 0.12, fit, yerr=[fit - lo, hi - fit], fmt="s", color="C1", capsize=4, elinewidth=4,
                        alpha=0.8, label=f"best fit, {level} delta-method band")
        ax.errorbar(x - (0 if plan.kind == "lines" else 0.12), y, yerr=np.where(np.isfinite(std), std, 0.0), fmt=".",
                    color="k", capsize=2, label="observed +- 1 std")
        lay.format_x(ax, obs, plan, panel)
        ax.set_ylabel(lay.quantity_label(quantity, lay.units(obs, panel, plan)))
        ax.set_title(panel.title, fontsize="medium")
    lay.legend(fig, axes)
    fig.suptitle(title + plan.note, fontsize="medium")
    return lay.save(fig, figure_path)


def _bounds(band: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """The low and high ends of an interval on ``bound`` (labels ``low``, ``high`` in ``bound_name``)."""
    names = pos.labels(band, "bound") if pos.is_labeled(band, "bound") else ["low", "high"]
    return band.isel(bound=names.index("low")), band.isel(bound=names.index("high"))


def _field_fit(obs: xr.DataArray, fitted: xr.DataArray, plan: pos.Layout, quantity: str, title: str,
               figure_path: str | Path) -> Path:
    """Observed, fitted and residual maps per label panel (rows); observed and fitted on one colour scale."""
    fig, axes = lay.grid(len(plan.panels), 3, size=(3.8, 3.0))
    for row, panel in zip(axes, plan.panels):
        o, f = lay.select(obs, panel), lay.select(fitted, panel)
        unit = lay.units(obs, panel)
        finite = np.concatenate([o.values[np.isfinite(o.values)], f.values[np.isfinite(f.values)]])
        scale = {"vmin": finite.min(), "vmax": finite.max()} if finite.size else {}
        for ax, data, name in ((row[0], o, "observed"), (row[1], f, "best fit")):
            mesh = lay.draw_map(ax, data, plan, cmap="viridis", **scale)
            ax.set_title(", ".join(t for t in (name, panel.title) if t), fontsize="medium")
        fig.colorbar(mesh, ax=list(row[:2]), label=lay.quantity_label(quantity, unit))
        residual = o - f
        limit = lay.symmetric_limit(residual.values)
        lay.draw_map(row[2], residual, plan, cmap="RdBu_r", vmin=-limit, vmax=limit,
                     colorbar=lay.quantity_label("observed - best fit", unit))
        row[2].set_title(", ".join(t for t in ("observed - best fit", panel.title) if t), fontsize="medium")
    fig.suptitle(title + plan.note, fontsize="medium")
    return lay.save(fig, figure_path)


def convergence_figure(ds: xr.Dataset, figure_path: str | Path, max_starts: int = MAX_STARTS) -> Path:
    """Cost against iteration for every start (up to ``max_starts``), coloured by the minimum reached."""
    cost = ds["history_cost"].values
    order = np.argsort(np.where(np.isfinite(ds["cost"].values), ds["cost"].values, np.inf), kind="stable")
    minimum = ds["minimum"].values
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    for k in order[:max_starts]:
        colour = cmap(minimum[k] % 10) if minimum[k] >= 0 else "0.6"
        ax.plot(np.arange(cost.shape[1]), cost[k], color=colour, lw=0.8, alpha=0.7)
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost (half the whitened sum of squares)")
    shown = min(max_starts, cost.shape[0])
    ax.set_title(f"convergence of {shown} of {cost.shape[0]} starts ({int(ds['n_minima'])} distinct minima; "
                 "colour = minimum, grey = failed)", fontsize="medium")
    return lay.save(fig, figure_path)


def estimates_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """An ensemble's estimates per parameter, in the best fit's standard errors about its estimate: the fit's
    interval (thin whiskers), the combined interval of fit and surrogate (thick, translucent), each member's own
    estimate (dots), the emulator-variance fit with its interval, and a true value where the observations are
    synthetic. One panel whatever the parameters' units; a parameter without a standard error is left empty."""
    best = ds.isel(start=_best(ds))
    names = [str(name) for name in ds["parameter_name"].values]
    estimate, se = best["estimate"].values, best["standard_error"].values
    scale = np.where(np.isfinite(se) & (se > 0), se, np.nan)

    def scaled(values: np.ndarray) -> np.ndarray:
        return (np.asarray(values, float) - estimate) / scale

    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 1.2 + 0.7 * len(names))), 4.2), constrained_layout=True)
    level = float(ds["estimate_combined_interval"].attrs.get("level", ds.attrs.get("level", 0.95)))
    combined = scaled(ds["estimate_combined_interval"].values.T)  # [bound, parameter]
    fitted = scaled(best["parameter_interval"].values.T)
    ax.errorbar(x, np.zeros(len(x)), yerr=[-combined[0], combined[1]], fmt="none", elinewidth=10, alpha=0.3,
                color="C0", label=f"{level:.0%} combined interval (fit and surrogate)")
    ax.errorbar(x, np.zeros(len(x)), yerr=[-fitted[0], fitted[1]], fmt="o", capsize=4, color="C0",
                label=f"best fit, its {level:.0%} interval")
    members = scaled(ds["estimate_member"].transpose("member", "parameter").values)
    for k, row in enumerate(members):
        ax.plot(x + 0.2, row, ".", color="C2", label="each member's own estimate" if k == 0 else None)
    if "estimate_emulator" in ds:
        emulator, low_high = scaled(ds["estimate_emulator"].values), scaled(ds["parameter_interval_emulator"].values.T)
        ax.errorbar(x - 0.2, emulator, yerr=[emulator - low_high[0], low_high[1] - emulator], fmt="s", capsize=3,
                    color="C1", label="with the emulator variance")
    if "true_parameter" in ds:
        ax.plot(x, scaled(ds["true_parameter"].values), "x", color="k", ms=8, label="true value")
    lay.category_ticks(ax, names)
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_ylabel("(value - estimate) / standard error")
    ax.set_title(f"estimates of the {ds.sizes['member']}-member ensemble, in the best fit's standard errors",
                 fontsize="medium")
    handles, texts = ax.get_legend_handles_labels()
    fig.legend(handles, texts, loc="outside lower center", ncol=2, fontsize="small")
    return lay.save(fig, figure_path)


def correlation_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """Parameter correlation matrix of the best fit, with identifiabilities in the labels.

    Up to :data:`~sensitivity.plots.layout.MAX_PARAMETERS` parameters each cell carries its value; past it (a field
    of inputs) the matrix is a map of at most 12 x 11 inches with every k-th parameter named. A best start without
    a covariance (rank-deficient) draws an empty matrix whose title says why.
    """
    best = ds.isel(start=_best(ds))
    corr = best["correlation"].values
    n = len(corr)
    plain = [str(name) for name in ds["parameter_name"].values]
    names = [f"{name} ({i:.2f})" for name, i in zip(plain, best["identifiability"].values)]
    fig, ax = plt.subplots(figsize=(min(12.0, max(5.5, 1.5 + 0.9 * n)), min(11.0, max(4.5, 1.0 + 0.8 * n))),
                           constrained_layout=True)
    im = ax.imshow(corr, cmap="RdBu_r", vmin=-1, vmax=1)
    if n <= lay.MAX_PARAMETERS:
        for (i, j), value in np.ndenumerate(corr):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="small",
                        color="w" if abs(value) > 0.6 else "k")
    step = max(1, -(-n // 32))  # at most 32 names per axis
    ax.set_xticks(range(0, n, step), plain[::step], rotation=45, ha="right")
    ax.set_yticks(range(0, n, step), names[::step])
    title = "parameter correlation (identifiability)"
    if not np.isfinite(corr).any():
        status = best["standard_error_status"]
        title += f"\nnone: the best start has no covariance ({status.attrs['flag_meanings'].split()[int(status)]})"
    ax.set_title(title, fontsize="medium")
    fig.colorbar(im, ax=ax)
    return lay.save(fig, figure_path)


def step_map_figure(path: str | Path, figure_path: str | Path, parameters: tuple[str, str] | None = None,
                    max_points: int = 400, max_arrow: float = 0.06) -> Path:
    """Damped Gauss-Newton steps of a ``step_map.nc`` projected on two parameters, as arrows coloured by
    the condition number of the weighted Jacobian.

    Parameters
    ----------
    path
        A ``step_map.nc`` file (with the sweep points ``x``).
    figure_path
        Where to write the PNG.
    parameters
        The two parameters of the projection; by default the two whose steps are largest relative to
        the spread of the points.
    max_points
        At most this many points (the first ones) are read and drawn.
    max_arrow
        Longer steps are drawn shortened to this fraction of the plotted range (direction kept).
    """
    with xr.open_dataset(path) as ds:
        ds = ds.isel(sample=slice(0, max_points)).load()
    names = [str(n) for n in ds["parameter_name"].values]
    x, step = ds["x"].transpose("sample", "parameter").values, ds["damped_step"].values
    if parameters is None:
        spread = np.nanmax(x, axis=0) - np.nanmin(x, axis=0)
        relative = np.nanmedian(np.abs(step), axis=0) / np.where(spread > 0, spread, 1.0)
        order = np.argsort(-np.nan_to_num(relative), kind="stable")
        a, b = (int(order[0]), int(order[1])) if len(names) > 1 else (0, 0)
    else:
        a, b = names.index(parameters[0]), names.index(parameters[1])
    with np.errstate(divide="ignore"):
        colour = np.log10(np.where(np.isfinite(ds["condition_number"].values), ds["condition_number"].values, np.nan))
    if len(names) == 1:
        return _step_line(ds, x[:, 0], step[:, 0], names[0], figure_path)
    spread = np.nanmax(x, axis=0) - np.nanmin(x, axis=0)
    spread = np.where(spread > 0, spread, 1.0)
    length = np.hypot(step[:, a] / spread[a], step[:, b] / spread[b])  # in fractions of the plotted range
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(length > max_arrow, max_arrow / length, 1.0)
    fig, ax = plt.subplots(figsize=(7, 6), constrained_layout=True)
    arrows = ax.quiver(x[:, a], x[:, b], shrink * step[:, a], shrink * step[:, b], colour, angles="xy",
                       scale_units="xy", scale=1, cmap="viridis", width=0.004)
    fig.colorbar(arrows, ax=ax, label="log10 condition number")
    pad = 0.05 * (np.nanmax(x, axis=0) - np.nanmin(x, axis=0))
    ax.set_xlim(np.nanmin(x[:, a]) - pad[a], np.nanmax(x[:, a]) + pad[a])
    ax.set_ylim(np.nanmin(x[:, b]) - pad[b], np.nanmax(x[:, b]) + pad[b])
    ax.set_xlabel(_label(ds["x"].isel(parameter=a), names[a]))
    ax.set_ylabel(_label(ds["x"].isel(parameter=b), names[b]))
    ax.set_title(f"damped Gauss-Newton steps at {ds.sizes['sample']} sweep points "
                 f"(drawn at most {max_arrow:.0%} of the range long)", fontsize="medium")
    return lay.save(fig, figure_path)


def _step_line(ds: xr.Dataset, x: np.ndarray, step: np.ndarray, name: str, figure_path: str | Path) -> Path:
    """One parameter: the damped step against the parameter, where it crosses zero (downwards) a minimum's basin
    ends in its fixed point."""
    order = np.argsort(x)
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    ax.plot(x[order], step[order], ".-", ms=3, lw=0.8)
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.set_xlabel(_label(ds["x"].isel(parameter=0), name))
    ax.set_ylabel(f"damped Gauss-Newton step of {name}")
    ax.set_title(f"damped Gauss-Newton steps at {ds.sizes['sample']} sweep points (zero: a fixed point)",
                 fontsize="medium")
    return lay.save(fig, figure_path)


def step_slice_figure(path: str | Path, figure_path: str | Path, max_arrow: float = 1.5) -> Path:
    """Cost contours, Gauss-Newton steps and the basin of the best minimum on a ``step_slice.nc`` slice.

    Parameters
    ----------
    path
        A ``step_slice.nc`` file (:meth:`~sensitivity.analyses.calibration.StepSlice.to_dataset`).
    figure_path
        Where to write the PNG.
    max_arrow
        Steps longer than this many grid spacings are drawn shortened to it (direction kept); shorter
        ones to scale, so an arrow that ends on the star is a step that lands on the minimum.
    """
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    a, b = ds["slice_a"].values, ds["slice_b"].values
    cost = ds["cost"].transpose("slice_a", "slice_b").values
    step = np.stack([ds["gn_step_a"].values, ds["gn_step_b"].values], axis=-1)
    spacing = np.array([np.ptp(a) / max(a.size - 1, 1), np.ptp(b) / max(b.size - 1, 1)])
    length = np.hypot(*(step / spacing).transpose(2, 0, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(length > max_arrow, max_arrow / length, 1.0)
    fig, ax = plt.subplots(figsize=(7.5, 6), constrained_layout=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_cost = np.log10(np.where(cost > 0, cost, np.nan))
    if np.isfinite(log_cost).any():
        filled = ax.contourf(a, b, log_cost.T, levels=16, cmap="viridis")
        ax.contour(a, b, log_cost.T, levels=filled.levels, colors="w", linewidths=0.4, alpha=0.6)
        fig.colorbar(filled, ax=ax, label="log10 cost")
    basin = ds["in_basin"].transpose("slice_a", "slice_b").values == 1
    if basin.any() and not basin.all():
        ax.contour(a, b, basin.T.astype(float), levels=[0.5], colors="r", linewidths=1.5)
    mesh_a, mesh_b = np.meshgrid(a, b, indexing="ij")
    ax.quiver(mesh_a, mesh_b, shrink * step[..., 0], shrink * step[..., 1], angles="xy", scale_units="xy", scale=1,
              color="w", width=0.003)
    if not basin.all():
        ax.scatter(mesh_a[~basin], mesh_b[~basin], marker="x", color="r", s=14, label="fit ends elsewhere")
    ax.plot(float(ds["best_a"]), float(ds["best_b"]), "*", color="orange", ms=14, mec="k", label="best minimum")
    ax.set_xlim(a.min(), a.max())
    ax.set_ylim(b.min(), b.max())
    ax.set_xlabel(_label(ds["slice_a"]))
    ax.set_ylabel(_label(ds["slice_b"]))
    ax.legend(loc="upper right", fontsize="small")
    basin_text = ("the fit from every grid point reaches the best minimum" if basin.all() else
                  f"basin of the best minimum (red line): {basin.mean():.0%} of the grid")
    ax.set_title(f"slice through the best estimate, other parameters fixed: Gauss-Newton steps (at most "
                 f"{max_arrow:g}\ngrid spacings long); {basin_text}", fontsize="medium")
    return lay.save(fig, figure_path)


def _label(var: xr.DataArray, name: str | None = None) -> str:
    units = var.attrs.get("units")
    if units is None and "parameter_units" in var.coords and var["parameter_units"].ndim == 0:
        units = str(var["parameter_units"].values)
    text = name or var.attrs.get("long_name") or str(var.name)
    return f"{text} [{units}]" if units else text
