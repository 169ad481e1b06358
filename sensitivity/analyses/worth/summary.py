"""The summary of a data-worth study (``worth.nc``): each forecast's uncertainty before and after the data, its
most valuable candidate, and the greedy designs; the worth workflow logs it and the study report renders it."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.worth.dataset import FORECAST
from sensitivity.analyses.worth.ensemble import RANKED
from sensitivity.datasets.summary import BAD, Cell, Fact, Summary, Table, Verdict
from sensitivity.datasets.summary_text import names, number, percent
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def summary(ds: xr.Dataset) -> Summary:
    """Per forecast its value, prior and posterior std and the share of the variance the data remove (with the
    posterior-averaged std and the verdict when the file has them); the designs as facts; a warning per forecast
    whose linear analysis disagrees with the posterior-averaged one (:func:`_disagreement`)."""
    facts = [Fact("observations, candidates", f"{ds.attrs.get('n_observed')}, {ds.attrs.get('n_candidates')}")]
    facts += [Fact("ensemble members", str(ds.attrs["ensemble_members"]))] if "worth_ranking_robust" in ds else []
    facts += [Fact(f"design for {name}", f"{len(chosen)} steps, {', '.join(chosen)}")
              for name, chosen in zip(ds["design_name"].values,
                                      ([str(c) for c in choice if c] for choice in ds["design_choice"].values))]
    averaged = "averaged_posterior_variance" in ds
    columns = ["forecast", "units", "value at the best fit", "prior std", "posterior std", "variance removed"]
    columns += ["posterior-averaged std", "linear / averaged std"] if averaged else []
    rows = []
    for f, name in enumerate(names(ds, "forecast")):
        row = [Cell(name), Cell(str(ds["forecast_units"].values[f])), Cell(number(ds["forecast_value"].values[f])),
               Cell(number(np.sqrt(ds["prior_variance"].values[f]))),
               Cell(number(np.sqrt(ds["posterior_variance"].values[f]))),
               Cell(percent(ds["variance_reduction"].values[f]))]
        if averaged:
            row += [Cell(number(np.sqrt(ds["averaged_posterior_variance"].values[f]))),
                    Cell(number(ds["linear_std_ratio"].values[f]),
                         flag=BAD if int(ds["linear_disagrees"].values[f]) else "")]
        rows.append(tuple(row))
    table = Table("forecasts: linear (FOSM) uncertainty at the best fit", tuple(columns), tuple(rows),
                  "The worth of every candidate and observation is in worth.nc (added_worth, removed_worth) and "
                  "its figure.")
    return Summary(str(ds.attrs.get("title", "data worth")), tuple(facts), (table,),
                   verdicts=tuple(_ranking_verdict(ds, f) for f in range(ds.sizes["forecast"]))
                   if "worth_ranking_robust" in ds else (),
                   warnings=tuple(_disagreement(ds, f) for f in range(ds.sizes[FORECAST])
                                  if "linear_disagrees" in ds and int(ds["linear_disagrees"].values[f])))


def _ranking_verdict(ds: xr.Dataset, f: int) -> Verdict:
    """Whether every member ranks forecast ``f``'s candidates and observations as the ensemble mean does; the
    members, their rank correlations and most valuable candidate / observation as its table."""
    name = str(ds["forecast_name"].values[f])
    level = float(ds["worth_ranking_robust"].attrs["min_rank_correlation"])
    ranked = [(kind, what) for kind, what in RANKED if f"{kind}_worth_rank_correlation" in ds]
    mean_best = {kind: str(ds[f"{kind}_worth_best_member"].values[0, f]) for kind, _ in ranked}  # when it holds
    rows, differ = [], []
    for k in range(ds.sizes["member"]):
        row = [Cell(str(k))]
        for kind, what in ranked:
            correlation = float(ds[f"{kind}_worth_rank_correlation"].values[k, f])
            best = str(ds[f"{kind}_worth_best_member"].values[k, f])
            row += [Cell(number(correlation), flag=BAD if correlation < level else ""), Cell(best)]
            if correlation < level:
                differ.append(f"member {k} ranks the {what} with Spearman {correlation:.3g} < {level:g}")
        rows.append(tuple(row))
    best = {kind: set(ds[f"{kind}_worth_best_member"].values[:, f].astype(str)) for kind, _ in ranked}
    differ += [f"the members' most valuable {what}: {', '.join(sorted(best[kind]))}" for kind, what in ranked
               if len(best[kind]) > 1]
    holds = bool(int(ds["worth_ranking_robust"].values[f]))
    differ = differ or ["the members agree on the most valuable candidate or observation, not the ensemble mean"]
    statement = (f"every member ranks the {' and '.join(w for _, w in ranked)} of {name} as the ensemble mean does "
                 f"(Spearman >= {level:g}, the same most valuable: {', '.join(mean_best.values())})" if holds else
                 f"the worth ranking of {name} depends on the surrogate's error: {'; '.join(differ)}")
    columns = ("member", *(c for kind, what in ranked for c in (f"Spearman ({what})", f"most valuable ({what})")))
    return Verdict(f"worth ranking of {name} robust to the surrogate", holds, statement,
                   Table(f"members' ranking of the data for {name}", columns, tuple(rows)))


def _disagreement(ds: xr.Dataset, f: int) -> str:
    """Forecast ``f``'s value, prior and posterior std, the share of the variance the data remove, its most valuable
    candidate and the ratio of its linear to its posterior-averaged std: the warning of a linear analysis that
    disagrees with the posterior-averaged one."""
    added = ds["added_worth"]
    spare = [d for d in added.dims if d != FORECAST]
    best = added.isel({FORECAST: f}).transpose(*spare).values.ravel()  # numpy: a labelled dim may carry two indexes
    where = int(np.nanargmax(best)) if np.isfinite(best).any() else None
    at = "" if where is None else ", ".join(f"{d}={_label(ds, d, i)}" for d, i in zip(
        spare, np.unravel_index(where, [added.sizes[d] for d in spare])))
    prior, posterior = (np.sqrt(float(ds[v][f])) for v in ("prior_variance", "posterior_variance"))
    return (f"forecast {ds['forecast_name'].values[f]}: {float(ds['forecast_value'][f]):.6g}, std prior "
            f"{prior:.4g} -> posterior {posterior:.4g} ({100 * float(ds['variance_reduction'][f]):.1f} % of the variance removed); best candidate {at}"
            f"; linear / posterior-averaged std {float(ds['linear_std_ratio'][f]):.3g}")


def _label(ds: xr.Dataset, dim: str, index: int) -> str:
    key = f"{dim}_name" if f"{dim}_name" in ds.coords else dim
    return str(ds[key].values[index])
