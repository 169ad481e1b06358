"""The summary of a Jacobian sweep (``sweep.nc``), which the study report renders."""
from __future__ import annotations


from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.summary_text import names, number, units_at, with_units
from sensitivity.datasets.summary import BAD, Fact, Summary

xr = lazy_import("xarray")

#: Variables of a sweep that are not the model's outputs.
NOT_OUTPUTS = ("x", "jacobian")


def summary(ds: xr.Dataset) -> Summary:
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
        facts.append(Fact(f"non-finite {what}", str(count), flag=BAD if count else ""))
        if count:
            warnings.append(f"sweep: {count} non-finite {what}")
    return Summary(str(ds.attrs.get("title", "sweep")), tuple(facts), warnings=tuple(warnings))

