"""The summary of an uncertainty propagation (``propagation.nc``: :func:`summary`) and of the pointwise one over a
sweep (``local_propagation.nc``: :func:`local_summary`), which the propagate workflow logs and the study report
renders."""
from __future__ import annotations

import itertools

import numpy as np

from sensitivity.analyses.propagation.dataset import METHOD_DIM, STATUS_OK
from sensitivity.analyses.propagation.verdict import VERDICT_NONLINEAR, summary_lines
from sensitivity.outputs.positions import is_labeled, output_dims, position_text
from sensitivity.runtime.lazy import lazy_import
from sensitivity.datasets.summary_text import checked, names, number, percent, units_at, with_units
from sensitivity.datasets.summary import BAD, Cell, Fact, Summary, Table, recorded_warnings

xr = lazy_import("xarray")

#: At most this many outputs get a row in the table of output moments (about: whole labels are shown).
MAX_ROWS = 16
#: Evenly spaced elements of a series shown (with the one of largest std).
ALONG = 5


def summary(ds: xr.Dataset) -> Summary:
    """Per method: its status, the share of model evaluations outside the bounds and the linearity verdict against
    the reference; the output mean and std of every method at the outputs shown; on an ensemble,
    each method's band (the posterior predictive's among them) beside the band with the surrogate's error, and the
    mean's and std's sampling interval beside the combined one (sampling and surrogate) and the members' spread;
    the verdict's warnings."""
    verdict = ds["nonlinear"].attrs if "nonlinear" in ds else {}
    reference = verdict.get("verdict_reference")
    facts = [Fact("inputs", str(ds.attrs.get("input_source") or ds.attrs.get("input_distribution", "not recorded"))),
             Fact("input distribution", str(ds.attrs.get("input_distribution", "not recorded")))]
    if reference:
        facts.append(Fact("verdict reference", str(reference) + (
            f": {verdict['verdict_reference_description']}" if verdict.get("verdict_reference_description") else "")))
        facts.append(Fact("verdict", f"nonlinear where the mean or std differs from {reference}'s by more than "
                                     f"{verdict.get('verdict_k_sigma', 3):g} standard errors + "
                                     f"{verdict.get('verdict_rtol', 0.05):g} of its std"))
    lines = summary_lines(ds) if "nonlinear" in ds else []
    tables = [_methods(ds), _moments(ds, reference)]
    if "output_band_combined_interval" in ds:
        tables.append(_bands(ds, reference))
    if "output_mean_combined_interval" in ds:
        tables.append(_combined(ds, reference))
    return Summary(str(ds.attrs.get("title", "propagation")), tuple(facts), tuple(tables),
                   warnings=recorded_warnings(ds) + tuple(line for severity, line in lines if severity == "warning"))


def _methods(ds: xr.Dataset) -> Table:
    rows = []
    for i, name in enumerate(names(ds, METHOD_DIM)):
        m = ds.isel({METHOD_DIM: i})
        ok = int(m["status"]) == STATUS_OK
        outside = float(m["outside_bounds"])
        row = [Cell(name), checked(str(m["status_message"].values.item()), ok),
               checked(percent(outside), outside <= 0.01)]
        flags = m["nonlinear"].values if "nonlinear" in ds else np.array([-1])
        if (flags < 0).all():
            row += [Cell("not assessed"), Cell("")]
        else:
            n = int((flags == VERDICT_NONLINEAR).sum())
            gaps = np.abs(np.stack([m["output_mean_discrepancy"].values, m["output_std_discrepancy"].values]))
            row += [checked(f"{n} of {flags.size}", n == 0), Cell(number(np.nanmax(gaps), 3))]
        rows.append(tuple(row))
    return Table("Methods and the linearity verdict",
                 ("method", "status", "evaluations outside the bounds", "outputs flagged nonlinear",
                  "largest gap [reference std]"), tuple(rows))


def _moments(ds: xr.Dataset, reference: str | None) -> Table:
    methods = names(ds, METHOD_DIM)
    mean, std = ds["output_mean"], ds["output_std"]
    scale = std.isel({METHOD_DIM: methods.index(reference) if reference in methods else 0})
    shown, note = shown_outputs(ds, scale)
    flags = ds["nonlinear"] if "nonlinear" in ds else None
    rows = []
    for index in shown:
        row = [Cell(position_text(ds, index) or str(mean.attrs.get("long_name", "output"))),
               Cell(units_at(mean, index))]
        for i in range(len(methods)):
            at = {METHOD_DIM: i, **index}
            bad = flags is not None and int(flags.isel(at)) == VERDICT_NONLINEAR
            row.append(Cell(f"{number(mean.isel(at))} ± {number(std.isel(at), 3)}", flag=BAD if bad else ""))
        rows.append(tuple(row))
    return Table("Output mean ± standard deviation by method", ("output", "units", *methods), tuple(rows),
                 note + " Red: flagged nonlinear.")


def _combined(ds: xr.Dataset, reference: str | None) -> Table:
    """An ensemble's mean and std per method and output shown: the estimate, its sampling interval, the combined
    interval (:mod:`sensitivity.analyses.propagation.ensemble`) and the standard deviation over the members."""
    methods = names(ds, METHOD_DIM)
    scale = ds["output_std"].isel({METHOD_DIM: methods.index(reference) if reference in methods else 0})
    shown, note = shown_outputs(ds, scale)
    level = float(ds["output_mean_combined_interval"].attrs.get("level", 0.95))
    rows = []
    for index, (i, method) in itertools.product(shown, enumerate(methods)):
        at = {METHOD_DIM: i, **index}
        row = [Cell(position_text(ds, index) or str(ds["output_mean"].attrs.get("long_name", "output"))),
               Cell(units_at(ds["output_mean"], index)), Cell(method)]
        for name in ("output_mean", "output_std"):
            row += [Cell(number(ds[name].isel(at))), Cell(_interval(ds[f"{name}_interval"].isel(at))),
                    Cell(_interval(ds[f"{name}_combined_interval"].isel(at))),
                    Cell(number(ds[f"{name}_surrogate_std"].isel(at), 3))]
        rows.append(tuple(row))
    columns = [f"{what} {part}" for what in ("mean", "std") for part in ("", "sampling", "combined", "surrogate std")]
    return Table(f"Ensemble: {level:.0%} intervals of the mean and std, sampling and combined (sampling and surrogate)",
                 ("output", "units", "method", *(c.strip() for c in columns)), tuple(rows),
                 note + f" Combined: each side's half-width the root sum of squares of the sampling one and "
                 f"{ds.attrs.get('ensemble_members', 'K')} members' spread (as the indices'); a moment method "
                 "samples nothing, its interval is the surrogate's alone.")


def _bands(ds: xr.Dataset, reference: str | None) -> Table:
    """An ensemble's band of the outputs per method and output shown: the band, the band with the surrogate's error
    (:mod:`sensitivity.analyses.propagation.ensemble`) and the members' spread at the samples."""
    methods = names(ds, METHOD_DIM)
    scale = ds["output_std"].isel({METHOD_DIM: methods.index(reference) if reference in methods else 0})
    shown, note = shown_outputs(ds, scale)
    level = float(ds["output_band_combined_interval"].attrs.get("level", 0.9))
    rows = []
    for index, (i, method) in itertools.product(shown, enumerate(methods)):
        at = {METHOD_DIM: i, **index}
        rows.append((Cell(position_text(ds, index) or str(ds["output_mean"].attrs.get("long_name", "output"))),
                     Cell(units_at(ds["output_mean"], index)), Cell(method),
                     Cell(_interval(ds["output_band"].isel(at))),
                     Cell(_interval(ds["output_band_combined_interval"].isel(at))),
                     Cell(number(ds["output_band_surrogate_std"].isel(at), 3))))
    columns = ("output", "units", "method", "band", "band with the surrogate's error", "members' std at the samples")
    members = ds.attrs.get("ensemble_members", "K")
    return Table(f"Ensemble: the {level:.0%} band of the outputs, and with the surrogate's error", columns,
                 tuple(rows), note + " With the surrogate's error: each side's half-width the root sum of squares of "
                 f"the band's and the {members} members' spread at the samples (root mean square over them), as every "
                 "combined interval of an ensemble.")


def _interval(bounds: xr.DataArray) -> str:
    """``[low, high]``, or ``none`` for a method that does not sample."""
    low, high = (float(v) for v in bounds.values)
    return "none" if np.isnan(low) else f"[{number(low)}, {number(high)}]"


def shown_outputs(ds: xr.Dataset, score: xr.DataArray) -> tuple[list[dict[str, int]], str]:
    """The outputs the moment table shows, and a note saying which: every output when there are at most
    :data:`MAX_ROWS`, else every named scalar (the first :data:`MAX_ROWS`); along a series, :data:`ALONG`
    evenly spaced elements and the one where ``score`` (the reference's std) is largest; on a field, that
    largest one; each per label of the labeled dims (the first labels, about :data:`MAX_ROWS` rows)."""
    dims = output_dims(score)
    labeled = [d for d in dims if is_labeled(ds, d)]
    numeric = [d for d in dims if d not in labeled]
    if int(np.prod([ds.sizes[d] for d in dims], dtype=int)) <= MAX_ROWS:  # a few outputs: every one
        return [dict(zip(dims, p)) for p in np.ndindex(*(ds.sizes[d] for d in dims))], "Every output."
    total = int(np.prod([ds.sizes[d] for d in labeled], dtype=int))
    per_label = min(ALONG + 1, ds.sizes[numeric[0]]) if len(numeric) == 1 else 1
    shown_labels = max(1, MAX_ROWS // per_label)
    positions = list(itertools.islice(np.ndindex(*(ds.sizes[d] for d in labeled)), shown_labels))
    more = f" (the first {len(positions)} of {total} labels)" if total > len(positions) else ""
    if not numeric:
        return [dict(zip(labeled, p)) for p in positions], f"Every output{more}."
    shown = []
    for p in positions:
        at = dict(zip(labeled, p))
        values = np.nan_to_num(score.isel(at).transpose(*numeric).values, nan=-np.inf)
        largest = tuple(int(i) for i in np.unravel_index(int(np.argmax(values)), values.shape))
        along = {(int(k),) for k in np.linspace(0, values.shape[0] - 1, min(ALONG, values.shape[0])).round()} \
            if len(numeric) == 1 else set()
        shown += [{**at, **dict(zip(numeric, where))} for where in sorted(along | {largest})]
    what = (f"{ALONG} evenly spaced values of {numeric[0]} and the one of largest std" if len(numeric) == 1
            else f"the output of largest std ({' x '.join(numeric)})")
    return shown, (f"At {what}" + (f" per {' x '.join(labeled)}" if labeled else "") + f"{more}; the figure "
                   "shows them all.")


def local_summary(ds: xr.Dataset) -> Summary:
    """The linear output std at every point of a sweep: how many points, from which input covariance (the values
    themselves are in the file and its figure; a sweep may be too large to summarise here)."""
    std = ds["output_std"]
    return Summary(str(ds.attrs.get("title", "pointwise propagation")), (
        Fact("sweep points", number(ds.sizes["sample"])),
        Fact("inputs", str(ds.attrs.get("input_source", "not recorded"))),
        Fact("linear output std", with_units(str(std.attrs.get("long_name", "output_std")), units_at(std)))))
