"""The summary of a multifidelity study (``multifidelity.nc``): the allocation, the simulator-anchored estimates beside
the surrogate's with both intervals, the bias the anchor corrected and its verdict, the achieved variance reduction;
the multifidelity workflow logs it and the study report renders it."""
from __future__ import annotations

import itertools

import numpy as np

from sensitivity.datasets.summary import Cell, Fact, Summary, Table, Verdict, recorded_warnings
from sensitivity.datasets.summary_text import checked, interval, names, number, percent, units_at, with_units
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: At most this many outputs get rows in the tables.
MAX_OUTPUTS = 8


def summary(ds: xr.Dataset) -> Summary:
    """Facts of the allocation; a table of the anchored and surrogate-only Sobol' indices and one of the moments,
    each with its interval, bias and variance reduction; the verdict on the surrogate's bias."""
    a = ds.attrs
    block = ds.sizes["parameter"] + 2
    spent = f"{a['n_sim_runs']} of a budget of {a['budget']} ({a['pilot_runs']} of them the pilot)"
    if a["surrogate_worthwhile"]:
        spent += (f"; the surrogate's {a['n_sur_rows'] * block} runs cost the worth of "
                  f"{number(a['n_sur_rows'] * block / a['cost_ratio'])} more at the cost ratio")
    facts = (
        Fact("simulator runs", spent),
        Fact("design", f"{a['n_sim_rows']} pick-freeze row blocks on the simulator, {a['n_sur_rows']} on the "
                       f"surrogate (optimal {a.get('n_sim_optimal', '?')} and {a['n_sur_optimal']})"),
        Fact("cost ratio", _cost_ratio(a)),
        Fact("pilot correlation", _range(ds["correlation"].values)),
        Fact("surrogate worthwhile", "yes" if a["surrogate_worthwhile"] else
             "no: it would not lower the variance at this cost ratio; the simulator alone sets the estimates"),
        *((Fact("allocation", a["allocation_note"]),) if a.get("allocation_note") else ()),
        *_constant(ds),
    )
    outputs = _outputs(ds)
    tables = (_indices(ds, outputs), _moments(ds, outputs))
    verdicts = ()
    if "reliability_pf_simulator" in ds:
        tables += (_failure_probabilities(ds),)
        verdicts = (_reliability_verdict(ds),)
    varies = ds["simulator_constant"] == 0 if "simulator_constant" in ds else True
    flagged = [q for q in ("S1", "ST", "output_mean", "output_variance")
               if int((ds[f"{q}_bias_significant"] * varies).sum())]
    verdict = Verdict(
        "the surrogate agrees with the simulator", not flagged,
        f"the simulator-anchored estimates differ from the surrogate's by more than their combined interval in "
        f"{', '.join(flagged)}: the surrogate is biased there and the anchored values stand" if flagged else
        "every anchored estimate agrees with the surrogate's within their combined interval" + (
            "; the outputs in which the simulator is constant left out" if _constant(ds) else ""))
    return Summary(str(a.get("title", "multifidelity")), facts, tables, (verdict, *verdicts), recorded_warnings(ds))


def _cost_ratio(a: dict) -> str:
    """The allocation's cost ratio, and whether it was given (repeatable) or measured on this run."""
    if a.get("cost_ratio_source") == "given":
        return f"{number(a['cost_ratio'])} (given: multifidelity.cost_ratio; the allocation repeats on any machine)"
    return (f"{number(a['cost_ratio'])}, measured on this run (simulator {number(a['cost_sim'])} s per run, surrogate "
            f"{number(a['cost_sur'])} s): the allocation depends on this machine's speed now; give "
            f"multifidelity.cost_ratio={number(a['cost_ratio'])} to repeat it")


def _constant(ds: xr.Dataset) -> tuple[Fact, ...]:
    """A fact naming the outputs in which the simulator's runs do not vary (none: no fact)."""
    if "simulator_constant" not in ds or not int(ds["simulator_constant"].sum()):
        return ()
    count, total = int(ds["simulator_constant"].sum()), int(ds["simulator_constant"].size)
    return (Fact("constant outputs", f"{count} of {total}: the simulator's {ds.attrs['n_sim_runs']} runs do not vary "
                                     "there (zero variance), so their Sobol' indices are undefined (NaN); the "
                                     "verdict leaves them out"),)


def _outputs(ds: xr.Dataset) -> list[dict[str, int]]:
    """Positions on the model's own output dims of the outputs shown (the first :data:`MAX_OUTPUTS`)."""
    dims = [d for d in ds["output_mean"].dims]
    return [dict(zip(dims, i)) for i in itertools.islice(np.ndindex(*(ds.sizes[d] for d in dims)), MAX_OUTPUTS)]


def _label(ds: xr.Dataset, at: dict[str, int]) -> str:
    from sensitivity.plots.layout import position_text

    return position_text(ds, at) or "output"


def _indices(ds: xr.Dataset, outputs: list[dict[str, int]]) -> Table:
    rows = []
    for at, (i, name) in itertools.product(outputs, enumerate(names(ds, "parameter"))):
        where = {"parameter": i, **at}
        row = [Cell(f"{name}, {_label(ds, at)}")]
        for q in ("S1", "ST"):
            row += _pair(ds, q, where)
        rows.append(tuple(row))
    return Table("Sobol' indices: simulator-anchored and surrogate-only",
                 ("parameter, output", "S1 anchored", "S1 surrogate", "S1 variance reduction", "ST anchored",
                  "ST surrogate", "ST variance reduction"), tuple(rows),
                 note="red: the surrogate's value is off the anchored one by more than their combined interval")


def _moments(ds: xr.Dataset, outputs: list[dict[str, int]]) -> Table:
    rows = []
    for at in outputs:
        row = [Cell(with_units(_label(ds, at), units_at(ds["output_mean"], at)))]
        for q in ("output_mean", "output_variance"):
            row += _pair(ds, q, at)
        rows.append(tuple(row))
    return Table("Output moments: simulator-anchored and surrogate-only",
                 ("output", "mean anchored", "mean surrogate", "mean variance reduction", "variance anchored",
                  "variance surrogate", "variance variance reduction"), tuple(rows))


def _pair(ds: xr.Dataset, q: str, at: dict[str, int]) -> list[Cell]:
    """Anchored value and interval, surrogate value and interval (flagged by the bias), variance reduction."""
    v = lambda name: ds[name].isel(at).values  # noqa: E731
    low, high = v(f"{q}_interval")
    s_low, s_high = v(f"{q}_surrogate_interval")
    biased = bool(v(f"{q}_bias_significant"))
    flag = checked(number(v(f"{q}_surrogate")), not biased)
    return [Cell(number(v(q)), interval(low, high)), Cell(flag.text, interval(s_low, s_high), flag=flag.flag),
            Cell(percent(v(f"{q}_variance_reduction")))]


def _failure_probabilities(ds: xr.Dataset) -> Table:
    """Per event of the reliability analysis: the anchored Pf and the surrogate's, each with its interval."""
    rows = []
    for k in range(ds.sizes["reliability_event"]):
        v = lambda name: ds[f"reliability_pf_{name}"].values[k]  # noqa: E731
        flag = checked(number(v("surrogate"), 3), not ds["reliability_changes"].values[k])
        rows.append((Cell(f"output {int(ds['reliability_event_output'].values[k])}, threshold "
                          f"{number(float(ds['reliability_event_threshold'].values[k]), 4)}"),
                     Cell(number(v("simulator"), 3), interval(*v("simulator_interval"))),
                     Cell(flag.text, interval(*v("surrogate_interval")), flag=flag.flag)))
    return Table("Failure probabilities: simulator-anchored and surrogate-only", ("event", "Pf anchored",
                 "Pf surrogate"), tuple(rows), note=f"{int(ds['reliability_runs'])} simulator runs; red: the "
                 "surrogate's error changes Pf beyond the sampling uncertainty")


def _reliability_verdict(ds: xr.Dataset) -> Verdict:
    changed = int(ds["reliability_changes"].values.sum())
    return Verdict("the surrogate's failure probabilities agree with the simulator's", not changed,
                   f"the simulator changes Pf beyond its sampling uncertainty on {changed} of "
                   f"{ds.sizes['reliability_event']} events: the anchored values stand" if changed else
                   f"every event's anchored Pf agrees with the surrogate's ({ds.sizes['reliability_event']} events)")


def _range(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return "NaN"
    return number(finite.min()) if finite.min() == finite.max() else f"{number(finite.min())} .. {number(finite.max())}"
