"""Figures of a data-worth study (:func:`sensitivity.analyses.worth.worth`): where to measure, the greedy design
paths, and what makes each forecast uncertain.

Every quantity is shown as a fraction of the forecast's posterior variance, so that forecasts of different units
share an axis:

* ``worth_candidates.png`` — the worth of every candidate (the share of the posterior variance it would remove) and
  of every observation (the share it would add, removed), on the model's own output dims
  (:func:`sensitivity.outputs.positions.plan`: a series per labeled panel, a map per forecast on a field, named scalars as
  categories), one line or marker per forecast; with posterior draws, the averaged worth dotted beside it;
* ``worth_designs.png`` — per design, each forecast's posterior standard deviation after each greedy step relative to
  today's, the chosen observations along the x axis;
* ``worth_contributions.png`` — per parameter, the share of each forecast's posterior variance that would go were the
  parameter known.
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay

FORECAST = "forecast"
#: The design figure's step labels stay upright while (steps + 1) x the longest label is at most this many characters.
TICK_CHARS = 24


def worth_figures(path: str | Path, out_dir: str | Path) -> list[Path]:
    """The figures of a ``worth.nc`` (see the module notes), written to ``out_dir``."""
    out_dir = Path(out_dir)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    figures = [candidates_figure(ds, out_dir / "worth_candidates.png"),
               designs_figure(ds, out_dir / "worth_designs.png")]
    if "contribution" in ds:
        figures.append(contributions_figure(ds, out_dir / "worth_contributions.png"))
    return figures


def _forecasts(ds: xr.Dataset) -> list[str]:
    return [str(n) for n in ds["forecast_name"].values]


def _share(ds: xr.Dataset, name: str) -> xr.DataArray:
    """``ds[name]`` over the forecast's posterior variance [1]."""
    return ds[name] / ds["posterior_variance"].where(ds["posterior_variance"] > 0)


def candidates_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """The worth of each candidate (solid) and observation (dashed) on the model's dims, per forecast."""
    added = ds["added_worth"]
    dims = [d for d in added.dims if d != FORECAST]
    layout = pos.plan(ds, dims)
    names = _forecasts(ds)
    series = [(key, style, what) for key, style, what in (
        ("added_worth", "-", "added"), ("removed_worth", "--", "removed"), ("averaged_added_worth", ":",
                                                                             "added, posterior-averaged"))
        if key in ds]
    if layout.kind == "map":
        return _worth_maps(ds, layout, names, figure_path)
    fig, axes = lay.wrapped(len(layout.panels))
    for ax, panel in zip(axes, layout.panels):
        x = lay.x_positions(ds, layout, panel)
        for f, name in enumerate(names):
            for key, style, what in series:
                y = lay.along_x(_share(ds, key).isel({FORECAST: f}), layout, panel)
                label = f"{name} ({what})"
                if layout.kind == "lines":
                    ax.plot(x, y, style, color=f"C{f}", label=label, marker="." if style == "-" else None)
                else:
                    ax.plot(x + lay.offsets(len(names))[f], y, "o" if style == "-" else "x", color=f"C{f}",
                            label=label, ls="none")
        ax.set_title(panel.title)
        lay.format_x(ax, ds, layout, panel)
        ax.set_ylabel("share of the posterior variance [1]")
    lay.legend(fig, axes)
    fig.suptitle(f"Worth of each observation: the share of each forecast's posterior variance it would remove "
                 f"(added) or add (removed){layout.note}")
    return lay.save(fig, figure_path)


def _worth_maps(ds: xr.Dataset, layout: pos.Layout, names: list[str], figure_path: str | Path) -> Path:
    """A field: one map of the candidates' worth per forecast (the first panel of the layout)."""
    panel = layout.panels[0]
    fig, axes = lay.wrapped(len(names))
    for f, (ax, name) in enumerate(zip(axes, names)):
        share = lay.select(_share(ds, "added_worth").isel({FORECAST: f}), panel)
        lay.draw_map(ax, share, layout, colorbar="share of the posterior variance [1]", cmap="viridis")
        ax.set_title(", ".join(t for t in (name, panel.title) if t))
    fig.suptitle(f"Worth of each candidate observation: the share of each forecast's posterior variance it would "
                 f"remove{layout.note}")
    return lay.save(fig, figure_path)


def designs_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """Per design: each forecast's posterior std after each step over today's, the chosen observations along x."""
    names = _forecasts(ds)
    designs = [str(d) for d in ds["design_name"].values]
    fig, axes = lay.wrapped(len(designs))
    today = np.sqrt(ds["posterior_variance"].values)
    for i, (ax, design) in enumerate(zip(axes, designs)):
        chosen = [_short(str(c)) for c in ds["design_choice"].values[i] if str(c)]
        steps = np.arange(len(chosen) + 1)
        for f, name in enumerate(names):
            after = np.sqrt(ds["design_variance"].values[i, :len(chosen), f])
            ax.plot(steps, np.r_[1.0, after / today[f]], "-o", color=f"C{f}", label=name, ms=3)
        ticks = ["now", *chosen]  # upright while they fit in a panel, else vertical: a label per step, however long
        ax.set_xticks(steps, ticks, rotation=0 if len(ticks) * max(map(len, ticks)) <= TICK_CHARS else 90)
        ax.set_title(f"design for {design} ({ds['design_criterion'].values[i]})")
        ax.set_ylabel("posterior std / today's [1]")
    lay.legend(fig, axes)
    fig.suptitle("Greedy designs: each forecast's posterior standard deviation as the chosen observations are added")
    return lay.save(fig, figure_path)


def _short(name: str) -> str:
    """``day=71`` of ``new_infections[day=71]``: a flat output name without the output's."""
    match = re.fullmatch(r"[^\[]*\[(.*)\]", name)
    return match[1] if match else name


def contributions_figure(ds: xr.Dataset, figure_path: str | Path) -> Path:
    """Bars per parameter: the share of each forecast's posterior variance that would go were it known."""
    share = _share(ds, "contribution")
    shown, note = lay.most_influential(share, "contribution")
    names = _forecasts(ds)
    params = [str(p) for p in ds["parameter_name"].values[shown]]
    fig, axes = lay.wrapped(1, size=(max(4.2, 0.9 * len(params) * max(1, len(names)) ** 0.5), 3.4))
    ax = axes[0]
    width = 0.8 / len(names)
    for f, name in enumerate(names):
        ax.bar(np.arange(len(params)) + lay.offsets(len(names), 0.8)[f],
               share.isel({FORECAST: f}).values[shown], width=width, color=f"C{f}", label=name)
    lay.category_ticks(ax, params)
    ax.set_ylabel("share of the posterior variance [1]")
    lay.legend(fig, axes)
    fig.suptitle(f"What makes each forecast uncertain: the share of its posterior variance that would go were the "
                 f"parameter known{note}")
    return lay.save(fig, figure_path)
