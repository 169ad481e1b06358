"""The summary of a calibration (``calibration.nc``: :func:`summary`) and of its step slice and step map, which the
calibrate workflow logs and the study report renders (:mod:`sensitivity.datasets.summary`)."""
from __future__ import annotations

import numpy as np

from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.summary_text import (checked, interval, meaning, names, number, percent, scalar, units_at,
                                               with_units)
from sensitivity.datasets.summary import BAD, Cell, Fact, Summary, Table

xr = lazy_import("xarray")


def summary(ds: xr.Dataset) -> Summary:
    """The key facts of a calibration: how the starts ended, the fit at the best start (statistics, rank, the
    true parameters' check with synthetic observations), its estimates with standard errors and intervals (on an
    ensemble, the combined interval of fit and surrogate beside the fit's), the fit with an ensemble's emulator
    variance; warnings for no successful start, an underdetermined fit, undefined
    standard errors and estimates held on a bound. A step slice or step map (same workflow) is summarised by
    :func:`step_slice` or :func:`step_map`."""
    best = int(scalar(ds, "best_start"))
    minima = minima_facts(ds)
    facts = [Fact("starts", f"{ds.sizes['start']}: {status_counts(ds['status'].values)}"), *minima,
             Fact("prior", str(ds.attrs.get("prior", "not recorded"))),
             Fact("noise", str(ds.attrs.get("noise", "not recorded"))),
             Fact("solver", str(ds.attrs.get("solver", "not recorded")))]
    if "fit_seconds" in ds.attrs:
        facts.append(Fact("fit time", str(ds.attrs["fit_seconds"]), "s"))
    title = str(ds.attrs.get("title", "calibration"))
    if best < 0:
        return Summary(title, tuple(facts), warnings=("no start of the calibration succeeded",))
    at = ds.isel(start=best)
    status = int(at["standard_error_status"])
    facts[1 + len(minima):1 + len(minima)] = [
        Fact("best start", f"{best}: {at['message'].values.item()}"),
        Fact("cost, chi2, reduced chi2", ", ".join(number(at[v]) for v in ("cost", "chi2", "reduced_chi2"))),
        Fact("AIC, BIC", f"{number(at['aic'])}, {number(at['bic'])}"),
        Fact("rank of the weighted Jacobian",
             f"{number(at['rank'])} of {ds.sizes['parameter']} (condition number {number(at['condition_number'])})",
             flag=BAD if int(at["rank"]) < ds.sizes["parameter"] else ""),
        Fact("standard errors", meaning(ds["standard_error_status"], status), flag=BAD if status else ""),
    ]
    if "true_parameter" in ds:
        facts.append(_truth_fact(ds))
    tables = [_estimates(ds, at)] + ([_emulator(ds)] if "estimate_emulator" in ds else [])
    return Summary(title, tuple(facts), tuple(tables), warnings=tuple(_warnings(ds, at, best, status)))


def minima_facts(ds: xr.Dataset) -> list[Fact]:
    """The distinct minima within the region of the best fit, and the rejected starts with their count and cost
    range: ``5 rejected starts (cost 3394 .. 1.291e+04 against the best 8.29)``."""
    from sensitivity.analyses.calibration.statistics import REJECTED

    if "minima_max_delta_cost" not in ds:  # a file written before starts were rejected
        return [Fact("distinct minima", number(scalar(ds, "n_minima")))]
    bound = scalar(ds, "minima_max_delta_cost")
    minima = Fact("distinct minima", f"{number(scalar(ds, 'n_minima'))} (cost within {number(bound)} of the best: "
                                     f"the {float(ds.attrs.get('minima_level', 0.999)):.1%} likelihood-ratio region)")
    rejected = ds["minimum"].values == REJECTED
    if not rejected.any():
        return [minima]
    cost = ds["cost"].values
    best = float(np.nanmin(cost[ds["minimum"].values >= 0]))
    return [minima, Fact("rejected starts", f"{int(rejected.sum())}, cost {number(cost[rejected].min())} .. "
                                            f"{number(cost[rejected].max())} against the best {number(best)}: held on a "
                                            "bound or in a far basin, not minima (the posterior does not start there)")]


def _warnings(ds: xr.Dataset, at: xr.Dataset, best: int, status: int) -> list[str]:
    warnings = []
    underdetermined = str(ds.attrs.get("underdetermined", "no"))
    if underdetermined != "no":
        warnings.append(f"underdetermined: {underdetermined}" + (
            "" if "prior_covariance" in ds else "; a prior (prior.std, or prior.from_space=true: the space's "
                                                "distributions) determines the fit"))
    if status:
        flag = str(ds["standard_error_status"].attrs["flag_meanings"]).split()[status]
        undetermined = (short_directions(at["unidentified_direction"].values, names(ds, "parameter"))
                        if "unidentified_direction" in at else str(at["unidentified"].values.item())) or \
            "the noise level (no degrees of freedom left)"
        warnings.append(f"best start {best} has no standard errors ({flag}); the data do not determine {undetermined}")
    held = [(name, int(side)) for name, side in zip(names(ds, "parameter"), at["at_bound"].values) if side] \
        if "at_bound" in ds else []
    if held:
        warnings.append(f"best start {best} holds " + ", ".join(
            f"{name} on its {'lower' if side < 0 else 'upper'} bound" for name, side in held)
            + ", where the fit would go beyond it: its standard error and interval are the unconstrained "
              "curvature's (the posterior stage samples within the bounds)")
    return warnings


def _truth_fact(ds: xr.Dataset) -> Fact:
    """How many true parameters (synthetic observations) lie inside their intervals."""
    inside, finite = ds["true_in_interval"].values, np.isfinite(ds["true_parameter"].values)
    unknown = int(((inside < 0) & finite).sum())
    n_inside = int((inside == 1).sum())
    return Fact("true parameters", f"{n_inside} of {int(finite.sum())} true parameters inside their intervals"
                + (f" ({unknown} without an interval, not checked)" if unknown else ""),
                flag=BAD if n_inside < int(finite.sum()) - unknown else "")


def status_counts(status: np.ndarray) -> str:
    """How the starts ended, in words: ``63 converged (63 rank-deficient), 2 at max_iter``."""
    from sensitivity.analyses.calibration.solvers import Status

    singular = int((status == Status.SINGULAR).sum())
    converged = int((status > 0).sum()) + singular
    words = [f"{converged} converged" + (f" ({singular} rank-deficient)" if singular else "")]
    for flag, what in ((Status.MAX_ITER, "at max_iter"), (Status.NON_FINITE, "non-finite")):
        if (status == flag).any():
            words.append(f"{int((status == flag).sum())} {what}")
    return ", ".join(words)


def short_directions(directions: np.ndarray, names: list[str], components: int = 5, shown: int = 3) -> str:
    """The undetermined directions ``[D, n]`` of a start (NaN rows: determined ones), in words: the first
    ``shown`` directions, each by its ``components`` largest components (``d(k04 +1, k44 -0.94, ...; 19 more)``,
    components below 1e-6 of the largest left out); the dataset keeps them whole."""
    rows = [d for d in np.asarray(directions, float) if np.all(np.isfinite(d))]
    words = []
    for d in rows[:shown]:
        moved = [i for i in np.argsort(-np.abs(d), kind="stable") if abs(d[i]) > 1e-6 * np.abs(d).max()]
        rest = len(moved) - components
        words.append(f"d({', '.join(f'{names[i]} {d[i]:+.4g}' for i in moved[:components])}"
                     + (f"; {rest} more)" if rest > 0 else ")"))
    more = len(rows) - shown
    return "; ".join(words) + (f"; {more} more directions (`unidentified` in calibration.nc)" if more > 0 else "")


def _estimates(ds: xr.Dataset, at: xr.Dataset) -> Table:
    level = float(ds.attrs.get("level", 0.95))
    truth = "true_parameter" in ds
    reduction = "prior_std_reduction" in ds
    combined = ds.get("estimate_combined_interval")  # an ensemble's: the fit's and the members' spread
    columns = ["parameter", "units", "estimate", "standard error", f"{level:.0%} interval"]
    columns += [f"{level:.0%} combined interval (fit and surrogate)"] if combined is not None else []
    columns += ["identifiability"] + (["prior std reduction"] if reduction else [])
    columns += ["true value", "inside the interval"] if truth else []
    columns += ["inside the combined interval"] if truth and combined is not None else []
    rows = []
    for j, name in enumerate(names(ds, "parameter")):
        p = at.isel(parameter=j)
        low, high = p["parameter_interval"].values
        row = [Cell(name), Cell(units_at(ds["estimate"], {"parameter": j})), Cell(number(p["estimate"])),
               Cell(number(p["standard_error"])), Cell(interval(low, high))]
        row += [Cell(interval(*combined.values[j]))] if combined is not None else []
        row += [Cell(number(p["identifiability"]))] + ([Cell(percent(p["prior_std_reduction"]))] if reduction else [])
        if truth:
            inside = int(ds["true_in_interval"].values[j])
            row += [Cell(number(ds["true_parameter"].values[j])),
                    checked(meaning(ds["true_in_interval"], inside), None if inside < 0 else inside == 1)]
            row += [_inside(ds["true_parameter"].values[j], *combined.values[j])] if combined is not None else []
        rows.append(tuple(row))
    note = "Intervals are symmetric in log x for log parameters" + (
        f" ({ds.attrs['log_parameters']})" if ds.attrs.get("log_parameters") else "") + "." + (
        f" The combined interval widens the fit's by the spread of the {ds.sizes['member']} members' own estimates "
        "(root sum of squares of the half-widths, as every analysis of an ensemble)." if combined is not None else "")
    return Table(f"Estimates at the best start, with {level:.0%} intervals", tuple(columns), tuple(rows), note)


def _emulator(ds: xr.Dataset) -> Table:
    """The fit with the ensemble's predictive variance, beside the range of the members' own estimates."""
    truth = ds["true_parameter"].values if "true_parameter" in ds else np.full(ds.sizes["parameter"], np.nan)
    columns = ("parameter", "estimate", "standard error", "interval", "members' estimates", "true value inside")
    rows = []
    for j, name in enumerate(names(ds, "parameter")):
        low, high = ds["parameter_interval_emulator"].values[j]
        members = ds["estimate_member"].values[:, j]
        rows.append((Cell(name), Cell(number(ds["estimate_emulator"].values[j])),
                     Cell(number(ds["standard_error_emulator"].values[j])), Cell(interval(low, high)),
                     Cell(f"{number(np.nanmin(members))} .. {number(np.nanmax(members))}"),
                     _inside(truth[j], low, high)))
    return Table(f"With the emulator variance of the {ds.sizes['member']}-member ensemble "
                 f"({ds.attrs.get('emulator_fits', '')} fits): chi2 {number(ds['chi2_emulator'])}", columns,
                 tuple(rows))


def _inside(truth: float, low: float, high: float) -> Cell:
    """Whether a true value lies in ``[low, high]``: yes, no, or empty where either is undefined."""
    inside = None if not np.isfinite(truth + low + high) else bool(low <= truth <= high)
    return checked("" if inside is None else "yes" if inside else "no", inside)


def step_slice(ds: xr.Dataset) -> Summary:
    """The two-parameter slice through the best estimate: its parameters, grid and the share of its basin."""
    a, b = str(ds.attrs.get("slice_parameters", "a b")).split()[:2]
    facts = [Fact("slice", f"{a} x {b}, {ds.sizes['slice_a']} x {ds.sizes['slice_b']} points"),
             Fact("best minimum on the slice",
                  f"{with_units(a, units_at(ds['best_a']))} = {number(scalar(ds, 'best_a'))}, "
                  f"{with_units(b, units_at(ds['best_b']))} = {number(scalar(ds, 'best_b'))}"),
             Fact("grid converging to the best minimum", percent(float(ds["in_basin"].mean())))]
    return Summary(str(ds.attrs.get("title", "step slice")), tuple(facts))


def step_map(ds: xr.Dataset) -> Summary:
    """Gauss-Newton steps at every sweep point: how many points, where the weighted Jacobian is rank-deficient, and
    of an ensemble's sweep that stores its members, the median over the points of the members' std of the step."""
    n = ds.sizes["parameter"]
    deficient = int((ds["rank"] < n).sum())
    facts = [Fact("sweep points", number(ds.sizes["sample"])),
             Fact("points with a rank-deficient weighted Jacobian", f"{deficient} (rank < {n})",
                  flag=BAD if deficient else ""),
             Fact("median condition number", number(float(np.nanmedian(ds["condition_number"].values))))]
    if "gn_step_member_std" in ds:
        spread = ds["gn_step_member_std"]
        median = np.nanmedian(spread.transpose("sample", "parameter").values, axis=0)
        facts.append(Fact("median std of the Gauss-Newton step over the members", ", ".join(
            f"{with_units(name, units_at(spread, {'parameter': j}))} {number(median[j])}"
            for j, name in enumerate(names(ds, "parameter")))))
    return Summary(str(ds.attrs.get("title", "step map")), tuple(facts))
