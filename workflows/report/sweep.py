"""Key numbers of a Jacobian sweep (``sweep.nc``) and of a result of no kind the report knows."""
from __future__ import annotations


from sensitivity.runtime.lazy import lazy_import
from workflows.report.cells import names, number, units_at, with_units
from workflows.report.page import BAD, Fact, Summary

xr = lazy_import("xarray")

#: Variables of a sweep that are not the model's outputs.
NOT_OUTPUTS = ("x", "jacobian")


def sweep(ds: xr.Dataset) -> Summary:
    """Points, parameters and outputs of a sweep, its engine, and the non-finite values it recorded (a warning)."""
    params = names(ds, "parameter")
    units = ds["parameter_units"].values if "parameter_units" in ds.coords else [""] * len(params)
    outputs = [f"{with_units(v, units_at(ds[v]))} on ({', '.join(d for d in ds[v].dims if d != 'sample')})"
               for v in ds.data_vars if v not in NOT_OUTPUTS and "sample" in ds[v].dims]
    facts = [Fact("points", number(ds.sizes["sample"])),
             Fact("parameters", ", ".join(with_units(p, str(u)) for p, u in zip(params, units))),
             Fact("outputs", "; ".join(outputs) or "none")]
    facts += [Fact(label, str(ds.attrs[key])) for label, key in (("engine", "engine"), ("shard", "shard"))
              if key in ds.attrs]
    warnings = []
    for key, what in (("nonfinite_values", "output values"), ("nonfinite_jacobian", "Jacobian entries")):
        count = int(ds.attrs.get(key, 0) or 0)
        facts.append(Fact(f"non-finite {what}", str(count), BAD if count else ""))
        if count:
            warnings.append(f"sweep: {count} non-finite {what}")
    return Summary(facts, [], warnings)


def other(ds: xr.Dataset) -> Summary:
    """A result of a kind the report has no summary of: its dims and variables."""
    return Summary([Fact("dims", ", ".join(f"{d} {n}" for d, n in ds.sizes.items()) or "none"),
                    Fact("variables", ", ".join(map(str, ds.data_vars)) or "none")])
