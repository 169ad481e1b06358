"""The summary of a posterior (``posterior.nc``): the NUTS estimates beside the Laplace fit, with their
convergence diagnostics; the posterior workflow logs it and the study report renders it."""
from __future__ import annotations

import numpy as np

from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.summary_text import checked, interval, names, number, scalar, units_at
from sensitivity.datasets.summary import BAD, GOOD, Cell, Fact, Summary, Table

xr = lazy_import("xarray")

#: The central credible interval the table shows when the file holds its quantiles.
CREDIBLE = (0.025, 0.975)


def summary(ds: xr.Dataset) -> Summary:
    """Posterior mean and std beside the Laplace (calibration) mean and std, R-hat and ESS against the file's
    thresholds; a warning when the chains failed their convergence checks."""
    converged = "converged" not in ds or int(scalar(ds, "converged")) == 1
    facts = [Fact("sampler", str(ds.attrs.get("sampler", "not recorded"))),
             Fact("chains x draws", f"{ds.sizes['chain']} x {ds.sizes['draw']}" + _left_out(ds)),
             Fact("prior", str(ds.attrs.get("prior", "not recorded"))),
             Fact("converged", "yes" if converged else f"no: {ds.attrs.get('diagnostics', '')}",
                  flag=GOOD if converged else BAD)]
    if "sampling_seconds" in ds.attrs:
        facts.append(Fact("sampling time", str(ds.attrs["sampling_seconds"]), "s"))
    for label, name in (("divergent transitions", "n_divergent"), ("step size", "step_size")):
        if name in ds:
            value = scalar(ds, name)
            facts.append(Fact(label, number(value), flag=BAD if name == "n_divergent" and value else ""))
    if "mean_accept_prob" in ds.attrs:
        facts.append(Fact("mean acceptance", str(ds.attrs["mean_accept_prob"])))
    warnings = [] if converged else [f"posterior chains failed convergence checks: {ds.attrs.get('diagnostics', '')}"]
    return Summary(str(ds.attrs.get("title", "posterior")), tuple(facts), (_estimates(ds),),
                   warnings=tuple(warnings))


def _left_out(ds: xr.Dataset) -> str:
    """`` (chains 2, 5 stuck, left out of the estimates)`` where the file kept only some chains, else ''."""
    if "chain_kept" not in ds or (ds["chain_kept"].values == 1).all():
        return ""
    stuck = np.flatnonzero(ds["chain_kept"].values != 1)
    return f" (chain{'s' if len(stuck) > 1 else ''} {', '.join(map(str, stuck))} stuck, left out of the estimates)"


def _estimates(ds: xr.Dataset) -> Table:
    rhat_max = float(ds.attrs.get("rhat_threshold", np.nan))
    ess_min = float(ds.attrs.get("ess_threshold", np.nan))
    quantiles = [float(q) for q in ds["quantile"].values] if "posterior_quantile" in ds else []
    credible = all(q in quantiles for q in CREDIBLE)
    laplace = "laplace_mean" in ds
    columns = ["parameter", "units", "posterior mean", "posterior std"]
    columns += [f"{CREDIBLE[1] - CREDIBLE[0]:.0%} credible interval"] if credible else []
    columns += ["Laplace mean", "Laplace std"] if laplace else []
    columns += ["R-hat", "ESS bulk", "ESS tail", "MCSE of the mean"]
    rows = []
    for j, name in enumerate(names(ds, "parameter")):
        p = ds.isel(parameter=j)
        row = [Cell(name), Cell(units_at(ds["posterior_mean"], {"parameter": j})), Cell(number(p["posterior_mean"])),
               Cell(number(p["posterior_std"]))]
        if credible:
            q = p["posterior_quantile"]
            row.append(Cell(interval(*(q.values[quantiles.index(c)] for c in CREDIBLE))))
        if laplace:
            row += [Cell(number(p["laplace_mean"])), Cell(number(p["laplace_std"]))]
        rhat, bulk, tail = (float(p[v]) for v in ("rhat", "ess_bulk", "ess_tail"))
        row += [checked(number(rhat), None if np.isnan(rhat_max) else rhat < rhat_max),
                checked(number(bulk, 3), None if np.isnan(ess_min) else bulk > ess_min),
                checked(number(tail, 3), None if np.isnan(ess_min) else tail > ess_min),
                Cell(number(p["mcse_mean"]) if "mcse_mean" in ds else "")]
        rows.append(tuple(row))
    note = (f"Checks: R-hat < {rhat_max:g}, ESS > {ess_min:g}." if np.isfinite(rhat_max) and np.isfinite(ess_min)
            else "")
    return Table("Posterior beside the Laplace approximation of the calibration", tuple(columns), tuple(rows), note)
