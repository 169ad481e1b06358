"""Key numbers of a data-worth study (``worth.nc``): each forecast's uncertainty before and after the data, its
most valuable candidate, and the greedy designs, as :func:`sensitivity.analyses.worth.summary` states them."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.worth import summary
from sensitivity.runtime.lazy import lazy_import
from workflows.report.cells import names, number, percent
from workflows.report.page import BAD, Cell, Fact, Summary, Table

xr = lazy_import("xarray")


def worth(ds: xr.Dataset) -> Summary:
    """Per forecast its value, prior and posterior std and the share of the variance the data remove (with the
    posterior-averaged std and the verdict when the file has them); the designs as facts; a warning per forecast
    whose linear analysis disagrees with the posterior-averaged one."""
    lines = summary(ds)
    facts = [Fact("observations, candidates", f"{ds.attrs.get('n_observed')}, {ds.attrs.get('n_candidates')}")]
    facts += [Fact(line.split(":")[0], line.split(":", 1)[1].strip()) for _, line in lines
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
        rows.append(row)
    table = Table("Forecasts: linear (FOSM) uncertainty at the best fit", columns, rows,
                  "The worth of every candidate and observation is in worth.nc (added_worth, removed_worth) and "
                  "its figure.")
    return Summary(facts, [table], [line for severity, line in lines if severity == "warning"])
