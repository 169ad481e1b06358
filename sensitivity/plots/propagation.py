"""Figures of an uncertainty propagation: output bands per method, and where the linear answer fails."""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import xarray as xr

from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay


def propagation_figure(path: str | Path, figure_path: str | Path) -> Path:
    """Output mean and quantile band per method, and the nonlinearity verdict, on the model's own dims.

    Parameters
    ----------
    path
        A ``propagation.nc`` file.
    figure_path
        Where to write the PNG.

    Returns
    -------
    Path
        ``figure_path``. Laid out by :mod:`sensitivity.plots.layout`, per label panel: above, the mean
        of each method with the band between its lowest and highest quantile (normal approximation for
        the moment methods, sample quantiles for Monte Carlo and the posterior predictive), as lines and
        bands along a series or as points with whiskers for named scalars; below, ``max(|mean gap|,
        |std gap|)`` of each method against the verdict's reference (the posterior predictive when
        present, else Monte Carlo), in the reference's std, flagged outputs marked with a cross; on an ensemble, the
        mean's combined interval (``output_mean_combined_interval``) as a darker band or a thick bar, and the
        reference's band with the surrogate's error (``output_band_combined_interval``: the posterior predictive's
        when present) as dotted lines or dotted whiskers with wide caps. A 2-D field: maps of each method's mean,
        band width and verdict gap (columns: methods).
    """
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    mean = ds["output_mean"]
    plan = pos.plan(mean, pos.output_dims(mean))
    names = pos.labels(ds, "propagation_method")
    low, high, prob = _band(ds)
    combined = ds.get("output_mean_combined_interval")  # an ensemble's: the mean's sampling and surrogate error
    wide = ds.get("output_band_combined_interval")  # an ensemble's: the band with the surrogate's error
    quantity = ds.attrs.get("output_long_name") or "output"
    if plan.kind == "map":
        return _maps(ds, plan, names, low, high, prob, quantity, figure_path)
    flags = ds["nonlinear"].transpose("propagation_method", ...).values
    per = 2 if (flags >= 0).any() else 1  # a verdict panel below each, when there is a verdict
    cols = min(len(plan.panels), lay.MAX_COLUMNS)
    rows = -(-len(plan.panels) // cols)
    fig, axes = lay.grid(per * rows, cols, size=(4.4, 2.3 if per == 2 else 3.0), height_ratios=[3, 2][:per] * rows)
    shift = lay.offsets(len(names))
    tops, off_axes = [], set()
    reference = names.index(_reference(ds)) if _reference(ds) in names else None
    for k, panel in enumerate(plan.panels):
        top = axes[per * (k // cols), k % cols]
        tops.append(top)
        x = lay.x_positions(mean, plan, panel)
        m, lo, hi = (lay.along_x(v, plan, panel) for v in (mean, low, high))  # [method, x]
        if combined is not None:
            c_lo, c_hi = (lay.along_x(combined.isel(bound=b), plan, panel) for b in (0, 1))
        if wide is not None and reference is not None:
            w_lo, w_hi = (lay.along_x(wide.isel(bound=b), plan, panel)[reference] for b in (0, 1))
        for i, name in enumerate(names):
            if plan.kind == "lines":
                line, = top.plot(x, m[i], label=name)
                top.fill_between(x, lo[i], hi[i], color=line.get_color(), alpha=0.12)
                top.plot(x, lo[i], x, hi[i], color=line.get_color(), lw=0.7, ls="--")
                if combined is not None:
                    top.fill_between(x, c_lo[i], c_hi[i], color=line.get_color(), alpha=0.4, lw=0)
            else:
                bar = top.errorbar(x + shift[i], m[i], yerr=[m[i] - lo[i], hi[i] - m[i]], fmt="o", capsize=3,
                                   label=name)
                if combined is not None:
                    top.errorbar(x + shift[i], m[i], yerr=[m[i] - c_lo[i], c_hi[i] - m[i]], fmt="none", elinewidth=6,
                                 alpha=0.4, color=bar.lines[0].get_color())
            if wide is not None and i == reference:
                colour = (line if plan.kind == "lines" else bar.lines[0]).get_color()
                _band_with_surrogate(top, plan, x + (0 if plan.kind == "lines" else shift[i]), m[i], w_lo, w_hi,
                                     colour, f"{name} band with the surrogate's error")
        if reference is not None:
            if wide is not None:  # the reference's band with the surrogate's error in view
                lo, hi = lo.copy(), hi.copy()
                lo[reference], hi[reference] = np.fmin(lo[reference], w_lo), np.fmax(hi[reference], w_hi)
            limits, off = _limits(lo, hi, reference)
            if limits is not None:
                top.set_ylim(*limits)
                off_axes.update(names[i] for i in off)
        top.set_ylabel(lay.quantity_label(quantity, lay.units(mean, panel, plan)))
        top.set_title(panel.title, fontsize="medium")
        lay.format_x(top, mean, plan, panel)
        if per == 2:
            top.set_xlabel("")
            bottom = axes[per * (k // cols) + 1, k % cols]
            _verdict_panel(bottom, ds, plan, panel, names)
            lay.format_x(bottom, mean, plan, panel)
    for k in range(len(plan.panels), rows * cols):  # the empty cells of the last row
        for r in range(per):
            axes[per * (k // cols) + r, k % cols].remove()
    lay.legend(fig, tops, title="method")
    beyond = (f"; {', '.join(sorted(off_axes))} beyond the axes (scaled to the bands near {_reference(ds)})"
              if off_axes else "")
    both = (f"; dark: the mean's {float(combined.attrs.get('level', 0.95)):.0%} combined interval (sampling and "
            "surrogate)" if combined is not None else "")
    both += (f"; dotted: {names[reference]}'s band with the surrogate's error"
             if wide is not None and reference is not None else "")
    fig.suptitle(f"{quantity}: mean and {prob:.0%} band per method{both}{plan.note}{beyond}\n" +
                 (f"below: nonlinearity verdict against {_reference(ds)}, {_counts(flags, names)}" if per == 2 else
                  _no_verdict(ds)), fontsize="medium")
    return lay.save(fig, figure_path)


def _band_with_surrogate(ax, plan: pos.Layout, x: np.ndarray, mean: np.ndarray, low: np.ndarray, high: np.ndarray,
                         color, label: str) -> None:
    """The band with the surrogate's error: dotted lines along a series, dotted whiskers with wide caps at points."""
    if plan.kind == "lines":
        ax.plot(x, low, color=color, lw=1.2, ls=":", label=label)
        ax.plot(x, high, color=color, lw=1.2, ls=":")
        return
    bar = ax.errorbar(x, mean, yerr=[mean - low, high - mean], fmt="none", capsize=7, elinewidth=1.2, color=color,
                      label=label)
    bar.lines[2][0].set_linestyle(":")


def _limits(low: np.ndarray, high: np.ndarray, reference: int, spread: float = 3.0
            ) -> tuple[tuple[float, float] | None, list[int]]:
    """y-limits of a panel of bands ``low, high [method, x]`` that a method far off the reference cannot flatten:
    every band within ``spread`` times the height of the reference's band of it, with a 5 % margin, and the methods
    left beyond; ``(None, [])`` when every band is within (the axes scale themselves)."""
    ref_low, ref_high = np.nanmin(low[reference], initial=np.inf), np.nanmax(high[reference], initial=-np.inf)
    height = ref_high - ref_low
    if not np.isfinite(height) or height <= 0:
        return None, []
    bottom, top = ref_low - spread * height, ref_high + spread * height
    lows, highs = np.nanmin(low, axis=1, initial=np.inf), np.nanmax(high, axis=1, initial=-np.inf)
    within = ((lows >= bottom) & (highs <= top)) | ~np.isfinite(lows)  # a method without a band here: nothing
    if within.all():
        return None, []
    shown_low, shown_high = lows[within].min(initial=ref_low), highs[within].max(initial=ref_high)
    margin = 0.05 * (shown_high - shown_low)
    return (shown_low - margin, shown_high + margin), [int(i) for i in np.flatnonzero(~within)]


def _no_verdict(ds: xr.Dataset) -> str:
    return f"no nonlinearity verdict: {_reference(ds)} is not among the methods (or it failed)"


def _band(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray, float]:
    """Lowest and highest reported quantile of every method, and the band's probability."""
    q, p = ds["output_quantile"], ds["quantile"].values
    return q.isel(quantile=int(np.argmin(p))), q.isel(quantile=int(np.argmax(p))), float(p.max() - p.min())


def _gap(ds: xr.Dataset) -> xr.DataArray:
    """``max(|mean gap|, |std gap|)`` of each method against the verdict's reference, in its std."""
    return np.fmax(np.abs(ds["output_mean_discrepancy"]), np.abs(ds["output_std_discrepancy"]))


def _reference(ds: xr.Dataset) -> str:
    return ds["nonlinear"].attrs.get("verdict_reference", "monte_carlo")


def _counts(flags: np.ndarray, names: list[str]) -> str:
    """``flagged: first_order 3/16, unscented 0/16`` for the methods with a verdict (``flags [method, ...]``)."""
    flags = flags.reshape(len(names), -1)
    parts = [f"{name} {int((flags[i] == 1).sum())}/{flags.shape[1]}" for i, name in enumerate(names)
             if (flags[i] >= 0).any()]
    return "flagged: " + ", ".join(parts) if parts else "no verdict"


def _verdict_panel(ax, ds: xr.Dataset, plan: pos.Layout, panel: pos.Panel, names: list[str]) -> None:
    """Disagreement of each method with the verdict's reference in one panel; flagged outputs marked with a cross."""
    gap = lay.along_x(_gap(ds), plan, panel)
    flags = lay.along_x(ds["nonlinear"], plan, panel)
    x = lay.x_positions(ds["output_mean"], plan, panel)
    shift = lay.offsets(len(names))
    shown = False
    for i, name in enumerate(names):
        if (flags[i] < 0).all():  # the reference itself, or a failed method
            ax.plot([], [], label=name)  # keeps each method's colour
            continue
        at = x + shift[i] if plan.kind == "points" else x  # a line's x may be a CF time axis's dates
        line, = ax.plot(at, gap[i], "o" if plan.kind == "points" else "-", label=name, markersize=4)
        bad = flags[i] == 1
        ax.plot(at[bad], gap[i][bad], "x", color=line.get_color(), markersize=8, markeredgewidth=1.5)
        shown = True
    if not shown:  # a verdict elsewhere, none for these outputs
        ax.text(0.5, 0.5, "no verdict for these outputs", ha="center", va="center", transform=ax.transAxes,
                fontsize="small")
        return
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylim(0.0, max(2.0 * float(np.nanmax(gap, initial=0.0)), 1e-2))
    ax.set_title(textwrap.fill(_counts(flags, names), 48), fontsize="small")  # fits a panel of three a row
    ax.set_ylabel(f"|method - {_reference(ds)}|\n/ its std (x: flagged)", fontsize="small")


def _maps(ds: xr.Dataset, plan: pos.Layout, names: list[str], low: xr.DataArray, high: xr.DataArray, prob: float,
          quantity: str, figure_path: str | Path) -> Path:
    """Per label panel rows of maps (mean, band width and, when there is a verdict, its gap), a column per method."""
    mean, flags = ds["output_mean"], ds["nonlinear"]
    reference = _reference(ds)
    rows_of = [(mean, f"{quantity} mean", "viridis"), (high - low, f"{prob:.0%} band width", "magma")]
    verdict = bool((flags >= 0).any())
    if verdict:
        rows_of.append((_gap(ds), None, "Reds"))
    n = len(rows_of)
    fig, axes = lay.grid(n * len(plan.panels), len(names), size=(3.4, 2.7))
    for p, panel in enumerate(plan.panels):
        unit = lay.units(mean, panel)
        where = f", {panel.title}" if panel.title else ""
        for r, (values, text, cmap) in enumerate(rows_of):
            row, shown = axes[n * p + r], lay.select(values, panel)
            finite = shown.values[np.isfinite(shown.values)]
            scale = {"vmin": 0.0 if text is None else finite.min(), "vmax": finite.max()} if finite.size else {}
            mesh = None
            for i, (ax, name) in enumerate(zip(row, names)):
                method_flags = lay.select(flags, panel).isel(propagation_method=i)
                if text is None and (method_flags.values < 0).all():  # the reference, or a failed method
                    label = f"{name}:\nthe verdict's reference" if name == reference else f"{name}: no verdict"
                    ax.text(0.5, 0.5, label, ha="center", va="center", transform=ax.transAxes)
                    ax.set_axis_off()
                    continue
                mesh = lay.draw_map(ax, shown.isel(propagation_method=i), plan, cmap=cmap, **scale)
                if text is None:
                    _mark_flagged(ax, method_flags, plan)
                ax.set_title(f"{name}{where}", fontsize="medium")
            if mesh is not None:
                label = lay.quantity_label(text, unit) if text else f"|method - {reference}| / its std"
                fig.colorbar(mesh, ax=list(row), label=label)
    counts = _counts(flags.transpose("propagation_method", ...).values, names)
    fig.suptitle(f"{quantity}: mean and {prob:.0%} band width per method{plan.note}" +
                 (f"\nnonlinearity verdict against {reference} (x: flagged), {counts}" if verdict else
                  f"\n{_no_verdict(ds)}"),
                 fontsize="medium")
    return lay.save(fig, figure_path)


def _mark_flagged(ax, flags: xr.DataArray, plan: pos.Layout) -> None:
    """A cross on every map cell the verdict flags."""
    values = flags.transpose(plan.y, plan.x).values
    ys, xs = np.nonzero(values == 1)
    ax.plot(flags[plan.x].values[xs], flags[plan.y].values[ys], "x", color="k", markersize=7)
