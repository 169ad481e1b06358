"""The summary of sensitivity indices (``indices.nc``): the parameter ranking with every measure and its intervals
(sampling, and of an ensemble the combined one with the surrogate std), the aggregated indices of a whole output,
and the cross-checks between methods; the indices workflow logs it and the study report renders it."""
from __future__ import annotations

import itertools

import numpy as np

from sensitivity.analyses.indices.driver import summary_lines
from sensitivity.outputs.index_measures import AGGREGATED, MEASURES, shown_outputs
from sensitivity.outputs.positions import position_text
from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.summary_text import interval, names, number, units_at, with_units
from sensitivity.datasets.summary import Cell, Fact, Summary, Table

xr = lazy_import("xarray")

#: At most this many positions of the kept dims get a table of aggregated indices.
MAX_AGGREGATED = 8


def is_indices(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is a result of indices: a ``measure`` dim, a ranking measure or an aggregated index."""
    return "measure" in ds.dims or any(m[0] in ds for m in MEASURES) or any(
        f"aggregated_{suffix}" in ds for suffix, _ in AGGREGATED)


def summary(ds: xr.Dataset) -> Summary:
    """A ranking table per output the figures show (the parameters in the order of the first ranking measure;
    each measure with its sampling interval, and where the dataset has them, an ensemble's combined interval of
    sampling and surrogate error and the members' std), the aggregated indices when computed, and the
    cross-checks; their warnings (heavy tails, DGSM bound, constant outputs)."""
    facts = [Fact("methods", str(ds.attrs.get("methods", "not recorded")))]
    facts += [Fact(f"{name.replace('_base_sample_size', '').replace('_n_points', '')} sample size", str(value))
              for name, value in ds.attrs.items() if name.endswith(("_base_sample_size", "_n_points"))]
    lines = summary_lines(ds)
    facts += [Fact("cross-check", line) for severity, line in lines if severity == "info"]
    present = [m for m in MEASURES if m[0] in ds]
    tables = [_ranking(ds, present, index, label) for index, label in shown_outputs(ds)] if present else []
    tables += _aggregated(ds)
    return Summary(str(ds.attrs.get("title", "sensitivity indices")), tuple(facts), tuple(tables),
                   warnings=tuple(line for severity, line in lines if severity == "warning"))


def _ranking(ds: xr.Dataset, present, index: dict[str, int], label: str) -> Table:
    params = names(ds, "parameter")
    ranks = ds["rank"].isel(index).transpose("measure", "parameter").values if "rank" in ds else None
    measures = names(ds, "measure") if ranks is not None else []
    order = np.argsort(ranks[0], kind="stable") if ranks is not None else np.arange(len(params))
    columns, cells = ["parameter"], []
    for var, bound, title in present:
        units = _units(ds[var], index)
        columns.append(with_units(title, units))
        cells.append(lambda j, var=var, bound=bound: _measure_cell(ds, var, bound, index, j))
        if f"{var}_combined_interval" in ds:
            columns.append(with_units(f"{title}: combined interval", units))
            cells.append(lambda j, var=var: Cell(_interval_at(ds, f"{var}_combined_interval", index, j)))
        if f"{var}_surrogate_std" in ds:
            columns.append(with_units(f"{title}: surrogate std", units))
            cells.append(lambda j, var=var: Cell(number(ds[f"{var}_surrogate_std"].isel(index).isel(parameter=j).values,
                                                        3)))
    columns += [f"rank by {' / '.join(measures)}"] if ranks is not None else []
    rows = []
    for j in order:
        row = [Cell(params[j])] + [cell(j) for cell in cells]
        if ranks is not None:
            row.append(Cell(" / ".join(number(r) for r in ranks[:, j])))
        rows.append(tuple(row))
    caption = "Parameter ranking" + (f" at {label}" if label else "")
    ensemble = any(f"{var}_combined_interval" in ds for var, _, _ in present)
    note = ("In the order of the first rank. Brackets: sampling confidence intervals" + (
        "; combined interval: sampling and surrogate error (the ensemble members' spread) together" if ensemble
        else "") + ". Rank 1 = most important; local derivatives in absolute value."
            + (" The output shown is the one of largest variance, as in the figures." if _numeric(ds, index) else ""))
    return Table(caption, tuple(columns), tuple(rows), note)


def _measure_cell(ds: xr.Dataset, var: str, bound: str | None, index: dict[str, int], j: int) -> Cell:
    """A measure at parameter ``j`` (local derivatives in absolute value) with its sampling interval."""
    value = ds[var].isel(index).isel(parameter=j).values
    value = np.abs(value) if var.startswith("local") else value
    return Cell(number(value), _interval_at(ds, bound, index, j) if bound is not None and bound in ds else "")


def _interval_at(ds: xr.Dataset, name: str, index: dict[str, int], j: int) -> str:
    return interval(*ds[name].isel(index).isel(parameter=j).transpose("bound").values)


def _units(da: xr.DataArray, index: dict[str, int]) -> str:
    units = units_at(da, index)
    return "" if units == "1" else units


def _numeric(ds: xr.Dataset, index: dict[str, int]) -> bool:
    """True when ``index`` holds a numeric output dim (a series or a field: one element was chosen)."""
    return any(f"{d}_name" not in ds.coords for d in index)


def _aggregated(ds: xr.Dataset) -> list[Table]:
    """Aggregated Sobol' indices (Gamboa et al. 2014) per position of the dims they keep."""
    present = [(suffix, label) for suffix, label in AGGREGATED if f"aggregated_{suffix}" in ds]
    if not present:
        return []
    first = ds[f"aggregated_{present[0][0]}"]
    kept = [d for d in first.dims if d != "parameter"]
    over = ", ".join(str(ds.attrs.get("aggregated_over", "")).split()) or "the output"
    key, label = next(((s, lb) for s, lb in present if s.startswith("ST")), present[0])
    tables = []
    for position in itertools.islice(np.ndindex(*(ds.sizes[d] for d in kept)), MAX_AGGREGATED):
        index = dict(zip(kept, position))
        rows = []
        order = np.argsort(-np.nan_to_num(ds[f"aggregated_{key}"].isel(index).transpose("parameter").values,
                                          nan=-np.inf), kind="stable")
        for j in order:
            name = names(ds, "parameter")[j]
            row = [Cell(name)]
            for suffix, _ in present:
                var, bound = f"aggregated_{suffix}", f"aggregated_{suffix}_interval"
                value = ds[var].isel(index).isel(parameter=j).values
                detail = interval(*ds[bound].isel(index).isel(parameter=j).transpose("bound").values) \
                    if bound in ds else ""
                row.append(Cell(number(value), detail))
            rows.append(tuple(row))
        where = position_text(ds, index)
        tables.append(Table(f"Aggregated Sobol' indices over {over}" + (f" at {where}" if where else ""),
                            ("parameter", *(label for _, label in present)), tuple(rows),
                            f"In decreasing order of {label}. Variance-weighted over the output elements (Gamboa, "
                            "Janon, Klein & Lagnoux 2014, doi:10.1214/14-EJS895). Brackets: confidence intervals."))
    return tables
