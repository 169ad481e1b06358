"""The summary of a data-worth study (``worth.nc``): each forecast's uncertainty before and after the data, its
most valuable candidate, and the greedy designs; the worth workflow logs it and the study report renders it."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.worth.dataset import summary_lines
from sensitivity.datasets.summary import BAD, Cell, Fact, Summary, Table
from sensitivity.datasets.summary_text import names, number, percent
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def summary(ds: xr.Dataset) -> Summary:
    """Per forecast its value, prior and posterior std and the share of the variance the data remove (with the
    posterior-averaged std and the verdict when the file has them); the designs as facts; a warning per forecast
    whose linear analysis disagrees with the posterior-averaged one."""
    lines = summary_lines(ds)
    facts = [Fact("observations, candidates", f"{ds.attrs.get('n_observed')}, {ds.attrs.get('n_candidates')}")]
    facts += [Fact(*(part.strip() for part in line.split(":", 1))) for _, line in lines
              if line.startswith("design for ")]
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
                   warnings=tuple(line for severity, line in lines if severity == "warning"))
