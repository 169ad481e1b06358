"""Key numbers of a calibration (``calibration.nc``) and of its step slice and step map."""
from __future__ import annotations

import numpy as np

from sensitivity.runtime.lazy import lazy_import
from workflows.report.cells import (checked, flag_counts, interval, meaning, names, number, percent, scalar,
                                      units_at, with_units)
from workflows.report.page import BAD, Cell, Fact, Summary, Table

xr = lazy_import("xarray")


def calibration(ds: xr.Dataset) -> Summary:
    """The fit at the best start: estimates with standard errors and intervals, identifiability, the truth check
    (synthetic observations), and the fit statistics; warnings for no successful start, an underdetermined fit
    and undefined standard errors."""
    best = int(scalar(ds, "best_start"))
    facts = [Fact("starts", f"{ds.sizes['start']}: {flag_counts(ds['status'])}"),
             Fact("distinct minima", number(scalar(ds, "n_minima"))),
             Fact("prior", str(ds.attrs.get("prior", "not recorded"))),
             Fact("noise", str(ds.attrs.get("noise", "not recorded"))),
             Fact("solver", str(ds.attrs.get("solver", "not recorded")))]
    if best < 0:
        return Summary(facts, [], ["no start of the calibration succeeded"])
    at = ds.isel(start=best)
    status = int(at["standard_error_status"])
    facts[2:2] = [
        Fact("best start", f"{best}: {at['message'].values.item()}"),
        Fact("cost, chi2, reduced chi2", ", ".join(number(at[v]) for v in ("cost", "chi2", "reduced_chi2"))),
        Fact("AIC, BIC", f"{number(at['aic'])}, {number(at['bic'])}"),
        Fact("rank of the weighted Jacobian",
             f"{number(at['rank'])} of {ds.sizes['parameter']} (condition number {number(at['condition_number'])})",
             BAD if int(at["rank"]) < ds.sizes["parameter"] else ""),
        Fact("standard errors", meaning(ds["standard_error_status"], status), BAD if status else ""),
    ]
    warnings = []
    underdetermined = str(ds.attrs.get("underdetermined", "no"))
    if underdetermined != "no":
        warnings.append(f"underdetermined: {underdetermined}")
    if status:
        undetermined = str(at["unidentified"].values.item()) or "the noise level (no degrees of freedom left)"
        warnings.append(f"best start {best} has no standard errors ({meaning(ds['standard_error_status'], status)}); "
                        f"the data do not determine {undetermined}")
    return Summary(facts, [_estimates(ds, at)], warnings)


def _estimates(ds: xr.Dataset, at: xr.Dataset) -> Table:
    level = float(ds.attrs.get("level", 0.95))
    truth = "true_parameter" in ds
    columns = ["parameter", "units", "estimate", "standard error", f"{level:.0%} interval", "identifiability"]
    columns += ["true value", "inside the interval"] if truth else []
    rows = []
    for j, name in enumerate(names(ds, "parameter")):
        p = at.isel(parameter=j)
        low, high = p["parameter_interval"].values
        row = [Cell(name), Cell(units_at(ds["estimate"], {"parameter": j})), Cell(number(p["estimate"])),
               Cell(number(p["standard_error"])), Cell(interval(low, high)), Cell(number(p["identifiability"]))]
        if truth:
            inside = int(ds["true_in_interval"].values[j])
            row += [Cell(number(ds["true_parameter"].values[j])),
                    checked(meaning(ds["true_in_interval"], inside), None if inside < 0 else inside == 1)]
        rows.append(row)
    note = "Intervals are symmetric in log x for log parameters" + (
        f" ({ds.attrs['log_parameters']})" if ds.attrs.get("log_parameters") else "") + "."
    return Table(f"Estimates at the best start, with {level:.0%} intervals", columns, rows, note)


def step_slice(ds: xr.Dataset) -> Summary:
    """The two-parameter slice through the best estimate: its parameters, grid and the share of its basin."""
    a, b = str(ds.attrs.get("slice_parameters", "a b")).split()[:2]
    facts = [Fact("slice", f"{a} x {b}, {ds.sizes['slice_a']} x {ds.sizes['slice_b']} points"),
             Fact("best minimum on the slice",
                  f"{with_units(a, units_at(ds['best_a']))} = {number(scalar(ds, 'best_a'))}, "
                  f"{with_units(b, units_at(ds['best_b']))} = {number(scalar(ds, 'best_b'))}"),
             Fact("grid converging to the best minimum", percent(float(ds["in_basin"].mean())))]
    return Summary(facts)


def step_map(ds: xr.Dataset) -> Summary:
    """Gauss-Newton steps at every sweep point: how many points, where the weighted Jacobian is rank-deficient, and
    of an ensemble's sweep that stores its members, the median over the points of the members' std of the step."""
    n = ds.sizes["parameter"]
    deficient = int((ds["rank"] < n).sum())
    facts = [Fact("sweep points", number(ds.sizes["sample"])),
             Fact("points with a rank-deficient weighted Jacobian", f"{deficient} (rank < {n})",
                  BAD if deficient else ""),
             Fact("median condition number", number(float(np.nanmedian(ds["condition_number"].values))))]
    if "gn_step_member_std" in ds:
        spread = ds["gn_step_member_std"]
        median = np.nanmedian(spread.transpose("sample", "parameter").values, axis=0)
        facts.append(Fact("median std of the Gauss-Newton step over the members", ", ".join(
            f"{with_units(name, units_at(spread, {'parameter': j}))} {number(median[j])}"
            for j, name in enumerate(names(ds, "parameter")))))
    return Summary(facts)
