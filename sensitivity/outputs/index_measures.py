"""The measures of a sensitivity-indices result (``indices.nc``) by name, and the outputs its figures and its
summary show, so that the ranking table of :func:`sensitivity.analyses.indices.summary.summary` and the bars of
:func:`sensitivity.plots.indices.bars_figure` name the same measures at the same outputs."""
from __future__ import annotations

import numpy as np

from sensitivity.outputs import positions as pos
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

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
#: The aggregated indices, in bar order: (suffix of ``aggregated_`` and ``aggregated_pca_``, label).
AGGREGATED: tuple[tuple[str, str], ...] = (("S1", "S1"), ("ST", "ST"), ("S1_full", "S1 full"), ("ST_full", "ST full"),
                                           ("S1_ind", "S1 independent"), ("ST_ind", "ST independent"))
#: Dims of ``indices.nc`` that are not the model's output dims (besides the dataset contract's own).
INDEX_DIMS = ("direction", "group", "n_samples", "measure", "measure_i", "measure_j", "quantity", "component")
#: At most this many outputs get a row of bars.
MAX_SHOWN = 8


def first_measure(ds: xr.Dataset) -> str | None:
    """The first per-output variable of ``ds``: its dims are the model's."""
    return next((n for n in [m[0] for m in MEASURES] + ["dgsm_nu", "active_subspace_eigenvalue"] if n in ds), None)


def output_dims(ds: xr.Dataset) -> list[str]:
    """The model's own output dims in ``ds`` (``["output"]`` for named scalars, e.g. ``["day"]`` for the SEIR demo)."""
    name = first_measure(ds)
    return [] if name is None else pos.output_dims(ds[name], INDEX_DIMS)


def measure_plan(da: xr.DataArray, **kwargs) -> pos.Layout:
    """The panels of a measure ``da`` on the model's output dims (:func:`sensitivity.outputs.positions.plan`)."""
    return pos.plan(da, pos.output_dims(da, INDEX_DIMS), **kwargs)


def shown_outputs(ds: xr.Dataset, reference: str | None = None,
                  variance: str | None = None) -> list[tuple[dict[str, int], str]]:
    """Which outputs the bar, ranking and active-subspace figures and the summary's ranking tables show:
    ``(isel, label)`` pairs.

    Named scalars: each output (the first :data:`MAX_SHOWN`). A series or a field: in each panel of
    its layout (one per label of a labeled dim), the element with the largest output variance (the
    most informative one to rank parameters on). ``reference`` and ``variance`` name the per-output variable whose
    dims are the model's and the output variance (default: the first of the indices' own that ``ds`` holds).
    """
    reference = reference or first_measure(ds)
    dims = [] if reference is None else pos.output_dims(ds[reference], INDEX_DIMS)
    if not dims:
        return [({}, "")]
    plan = measure_plan(ds[reference], categories=False, max_panels=MAX_SHOWN)
    if plan.kind == "points":
        return [(dict(p.index), p.title) for p in plan.panels]
    names = (variance,) if variance else ("sobol_variance", "dgsm_variance", "sobol_dependent_variance",
                                          "shapley_variance", "given_data_variance")
    variance = next((ds[v] for v in names if v in ds), None)
    numeric = [d for d in dims if not pos.is_labeled(ds, d)]
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
        shown.append((index, pos.position_text(ds, index)))
    return shown
