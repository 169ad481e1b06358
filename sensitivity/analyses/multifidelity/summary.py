"""The summary of a multifidelity study (``multifidelity.nc``): the allocation, the simulator-anchored estimates beside
the surrogate's with both intervals, the bias the anchor corrected and its verdict, the achieved variance reduction;
the multifidelity workflow logs it and the study report renders it."""
from __future__ import annotations

import itertools

import numpy as np

from sensitivity.analyses.agreement import (FAILS, HOLDS, INCONCLUSIVE, INDEX_TOLERANCE, MOMENT_TOLERANCE, Power,
                                            overall, runs_needed)
from sensitivity.datasets.settings import recorded_attr
from sensitivity.datasets.summary import BAD, GOOD, UNSURE, Cell, Fact, Summary, Table, Verdict, recorded_warnings
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
    return Summary(str(a.get("title", "multifidelity")), facts, tables, (_agreement(ds), *verdicts),
                   recorded_warnings(ds))


#: The estimates judged, in the order named.
QUANTITIES = ("S1", "ST", "output_mean", "output_variance")


def _agreement(ds: xr.Dataset) -> Verdict:
    """Fails naming the estimates the surrogate is biased on; else inconclusive naming those the simulator's runs
    could not have judged (with the runs that would); else holds (:mod:`sensitivity.analyses.agreement`)."""
    codes = {q: _codes(ds, q) for q in QUANTITIES}
    failing = [name for q in QUANTITIES for name in _named(ds, q, codes[q] == FAILS)]
    blind = [name for q in QUANTITIES for name in _named(ds, q, codes[q] == INCONCLUSIVE)]
    code = overall(np.concatenate([c.ravel() for c in codes.values()]))
    tolerance = f"or the tolerance {number(INDEX_TOLERANCE)} of an index"
    if code == FAILS:
        statement = (f"the simulator-anchored estimates differ from the surrogate's by more than their combined "
                     f"interval {tolerance} in {_list(failing)}: the surrogate is biased there and the anchored values "
                     "stand")
    elif code == INCONCLUSIVE:
        statement = (f"no anchored estimate differs from the surrogate's by more than their combined interval "
                     f"{tolerance}, but the {ds.attrs['n_sim_runs']} simulator runs could not have seen a factor-2 "
                     f"error in {_list(blind)}: about {number(_runs_needed(ds, codes))} would")
    else:
        statement = (f"every anchored estimate agrees with the surrogate's within their combined interval "
                     f"{tolerance}, and the simulator's runs could have seen a factor-2 error in each")
    if _constant(ds):
        statement += "; the outputs in which the simulator is constant left out"
    return Verdict.of("the surrogate agrees with the simulator", code, statement)


def _codes(ds: xr.Dataset, q: str) -> np.ndarray:
    """The recorded agreement of each value of ``q`` (a result without it: fails where the bias is significant),
    holds in the outputs where the simulator is constant (left out: their indices are undefined, not wrong)."""
    codes = ds[f"{q}_agreement"] if f"{q}_agreement" in ds else \
        xr.where(ds[f"{q}_bias_significant"] == 1, FAILS, HOLDS).transpose(*ds[f"{q}_bias_significant"].dims)
    if "simulator_constant" in ds:
        codes = codes.where(ds["simulator_constant"] == 0, HOLDS).transpose(*codes.dims)
    return codes.values


def _named(ds: xr.Dataset, q: str, where: np.ndarray) -> list[str]:
    """``S1 of x3 (day = 2)`` for each value of ``q`` where ``where``."""
    da = ds[f"{q}_bias"]
    found = []
    for at in np.argwhere(where):  # a scalar output: one 0-d value
        position = dict(zip(da.dims, (int(i) for i in at)))
        label = _label(ds, {d: i for d, i in position.items() if d != "parameter"})
        found.append(f"{q} of {names(ds, 'parameter')[position['parameter']]} ({label})" if "parameter" in position
                     else f"{q.replace('output_', '')} of {label}")
    return found


def _list(items: list[str]) -> str:
    return ", ".join(items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")


def _runs_needed(ds: xr.Dataset, codes: dict[str, np.ndarray]) -> int:
    """The simulator runs at which every inconclusive value's standard error would see a factor-2 error (or the
    tolerance), from the runs spent (:func:`~sensitivity.analyses.agreement.runs_needed`)."""
    power, runs = Power(float(recorded_attr(ds, "level", 0.95))), int(ds.attrs["n_sim_runs"])
    std = np.sqrt(np.maximum(ds["output_variance"].values, 0.0))
    scales = {"S1": (ds["S1"].values, INDEX_TOLERANCE), "ST": (ds["ST"].values, INDEX_TOLERANCE),
              "output_mean": (std, MOMENT_TOLERANCE * std),
              "output_variance": (ds["output_variance"].values, 2 * MOMENT_TOLERANCE * std**2)}
    needed = [runs_needed(ds[f"{q}_bias_se"].values, scales[q][0], runs, scales[q][1], power)[codes[q] == INCONCLUSIVE]
              for q in QUANTITIES]
    return int(np.max(np.concatenate(needed), initial=runs))


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
    from sensitivity.outputs.positions import position_text

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
                 note="red: the surrogate's value is off the anchored one by more than their combined interval and the "
                      "tolerance; amber: the simulator's runs could not have seen a factor-2 error")


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
    code = int(_codes(ds, q)[tuple(at.get(d, 0) for d in ds[f"{q}_bias"].dims)])
    flag = {FAILS: BAD, HOLDS: GOOD, INCONCLUSIVE: UNSURE}[code]
    return [Cell(number(v(q)), interval(low, high)),
            Cell(number(v(f"{q}_surrogate")), interval(s_low, s_high), flag=flag),
            Cell(percent(v(f"{q}_variance_reduction")))]


def _failure_probabilities(ds: xr.Dataset) -> Table:
    """Per event of the reliability analysis: the anchored Pf and the surrogate's, each with its interval."""
    rows = []
    for k in range(ds.sizes["reliability_event"]):
        v = lambda name: ds[f"reliability_pf_{name}"].values[k]  # noqa: E731
        flag = checked(number(v("surrogate"), 3), not ds["reliability_changes"].values[k])
        if "reliability_event_verdict" in ds and int(ds["reliability_event_verdict"].values[k]) == INCONCLUSIVE:
            flag = Cell(flag.text, flag=UNSURE)
        rows.append((Cell(f"output {int(ds['reliability_event_output'].values[k])}, threshold "
                          f"{number(float(ds['reliability_event_threshold'].values[k]), 4)}"),
                     Cell(number(v("simulator"), 3), interval(*v("simulator_interval"))),
                     Cell(flag.text, interval(*v("surrogate_interval")), flag=flag.flag)))
    return Table("Failure probabilities: simulator-anchored and surrogate-only", ("event", "Pf anchored",
                 "Pf surrogate"), tuple(rows), note=f"{int(ds['reliability_runs'])} simulator runs; red: the "
                 "surrogate's error changes Pf beyond the sampling uncertainty; amber: the runs could not have seen a "
                 "factor-2 change")


def _reliability_verdict(ds: xr.Dataset) -> Verdict:
    changed = int(ds["reliability_changes"].values.sum())
    events = ds.sizes["reliability_event"]
    code = int(ds["reliability_verdict"]) if "reliability_verdict" in ds else HOLDS if not changed else FAILS
    if changed:
        statement = (f"the simulator changes Pf beyond its sampling uncertainty on {changed} of {events} events: the "
                     "anchored values stand")
    elif code == INCONCLUSIVE:
        blind = np.flatnonzero(ds["reliability_event_verdict"].values == INCONCLUSIVE)
        needed = ds["reliability_runs_needed"].values[blind]
        statement = (f"no event's anchored Pf differs from the surrogate's beyond the sampling uncertainty, but on "
                     f"{len(blind)} of {events} events the simulator's runs could not have seen a factor-2 change "
                     + (f"(about {number(int(np.nanmax(needed)))} runs per event would)" if np.isfinite(needed).all()
                        else "(some events have no design point or too small an importance sample)"))
    else:
        statement = f"every event's anchored Pf agrees with the surrogate's ({events} events)"
    return Verdict.of("the surrogate's failure probabilities agree with the simulator's", code, statement)


def _range(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return "NaN"
    return number(finite.min()) if finite.min() == finite.max() else f"{number(finite.min())} .. {number(finite.max())}"
