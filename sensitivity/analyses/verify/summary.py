"""The summary of a verification (``verify.nc``): one verdict per verified analysis with its worst cases, the
refinement's outcome and, after a refinement, the retrained ensemble's verdicts; the verify workflow logs it and
the study report renders it, so a cached rerun reports the verdicts the first run computed."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.agreement import INCONCLUSIVE
from sensitivity.datasets.summary import BAD, PLAIN, UNSURE, Cell, Fact, Summary, Table, Verdict
from sensitivity.datasets.summary_text import number
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: The analyses a verification checks: (what it is called, the prefix of its variables), in the order checked.
ANALYSES = (("calibration", "calibration"), ("posterior", "posterior"), ("indices", "sobol"),
            ("reliability", "reliability"), ("propagation", "propagation"))
#: At most this many worst cases per verdict.
WORST = 5


def is_verification(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is a verification's result: it holds a verdict of one of :data:`ANALYSES`."""
    return any(f"{prefix}_verdict" in ds for _, prefix in ANALYSES)


def summary(ds: xr.Dataset) -> Summary:
    """A verdict per analysis ``verify.nc`` holds (``<prefix>_verdict``), each with its worst cases; of a refined
    ensemble the same checks (``refined_<prefix>_verdict``) and the refinement's outcome."""
    facts = [Fact("simulator", str(ds.attrs.get("simulator", "not recorded"))),
             Fact("verdict", str(ds.attrs.get("verdict", "not recorded")),
                  flag={"fails": BAD, "inconclusive": UNSURE}.get(ds.attrs.get("verdict"), PLAIN))]
    verdicts = [_verdict(ds, name, prefix) for name, prefix in ANALYSES if f"{prefix}_verdict" in ds]
    if "refine_verdict" in ds:
        facts.append(Fact("refinement", f"{ds.attrs.get('refine_outcome', '')} after {ds.sizes['round'] - 1} round(s):"
                                        f" {number(ds['refine_training_size'].values[0])} -> "
                                        f"{number(ds['refine_training_size'].values[-1])} training samples, rms "
                                        f"error on the analyses' points {number(ds['refine_error_rms'].values[0], 3)}"
                                        f" -> {number(ds['refine_error_rms'].values[-1], 3)} of the outputs' spread"))
        verdicts += [_verdict(ds, f"refined ensemble: {name}", f"refined_{prefix}") for name, prefix in ANALYSES
                     if f"refined_{prefix}_verdict" in ds]
    return Summary(str(ds.attrs.get("title", "verification")), tuple(facts), verdicts=tuple(verdicts))


#: What a cause of an index's flag means (:data:`sensitivity.analyses.verify.verdict.CAUSES`), in a statement.
WHY = {"error": "error beyond the half-width and the tolerance", "ranking": "ranking of influential inputs changed",
       "threshold": "importance threshold crossed"}


def _verdict(ds: xr.Dataset, name: str, prefix: str) -> Verdict:
    code = int(ds[f"{prefix}_verdict"])  # the recorded verdict: fails, holds or inconclusive
    if prefix.endswith("calibration"):
        ratio = ds[f"{prefix}_shift_ratio"].values
        statement = (f"{_flagged_parameters(ds, prefix)}the surrogate's error shifts the estimate by at most "
                     f"{np.nanmax(ratio):.2f} standard errors (absolute floor {_floor_text(ds, prefix)}); whitened "
                     f"error at the best fit {float(ds[f'{prefix}_whitened_error_rms'][0]):.2f} x the noise")
        return Verdict.of(name, code, statement, _parameter_worst(ds, prefix, ("estimate_shift", "standard_error"),
                                                                "shift / standard error"))
    if prefix.endswith("posterior"):
        ratio = ds[f"{prefix}_shift_ratio"].values
        statement = (f"{_flagged_parameters(ds, prefix)}reweighting to the simulator moves the posterior mean by at "
                     f"most {np.nanmax(ratio):.2f} Monte Carlo standard errors (absolute floor "
                     f"{_floor_text(ds, prefix)}; importance ESS {float(ds[f'{prefix}_importance_ess']):.2f} per "
                     "draw)")
        return Verdict.of(name, code, statement, _parameter_worst(ds, prefix, ("mean_shift", "mcse"),
                                                                "shift / Monte Carlo standard error"))
    if prefix.endswith("reliability"):
        return _reliability(ds, name, prefix, code)
    if prefix.endswith("propagation"):
        return _propagation(ds, name, prefix, code)
    return _sobol(ds, name, prefix, code)


def _reliability(ds: xr.Dataset, name: str, prefix: str, code: int) -> Verdict:
    """The events whose pf the simulator changes beyond its sampling uncertainty, those whose check could not have
    seen a factor-2 change (with the runs that would have), the largest change first."""
    change = ds[f"{prefix}_pf_change"].values
    changed = int(ds[f"{prefix}_changes"].values.sum())
    statement = (f"the surrogate's error changes pf beyond its sampling uncertainty on {changed} of {change.size} "
                 f"events ({int(ds[f'{prefix}_runs'])} simulator runs)")
    if np.isfinite(ds[f"{prefix}_sign_agreement"].values).any():
        statement += (f"; the simulator agrees on the sign of g on "
                      f"{np.nanmin(ds[f'{prefix}_sign_agreement'].values):.0%} or more of its runs")
    statement += _inconclusive_events(ds, prefix)
    order = [int(k) for k in np.argsort(-np.nan_to_num(np.abs(change), nan=-1.0))[:WORST]]
    per_event = ds.get(f"{prefix}_event_verdict")
    rows = tuple((Cell(_event(ds, prefix, k)),
                  Cell(f"{number(float(ds[f'{prefix}_pf_surrogate'].values[k]), 3)} -> "
                       f"{number(float(ds[f'{prefix}_pf_simulator'].values[k]), 3)}",
                       flag=BAD if ds[f"{prefix}_changes"].values[k] else UNSURE if per_event is not None and int(
                           per_event.values[k]) == INCONCLUSIVE else PLAIN)) for k in order)
    return Verdict.of(name, code, statement, Table("largest changes of pf", ("event", "pf surrogate -> simulator"),
                                                    rows, note="amber: the check could not have seen a factor-2 "
                                                               "change"))


def _event(ds: xr.Dataset, prefix: str, k: int) -> str:
    return (f"output {int(ds[f'{prefix}_event_output'].values[k])}, threshold "
            f"{number(float(ds[f'{prefix}_event_threshold'].values[k]), 4)}")


def _inconclusive_events(ds: xr.Dataset, prefix: str) -> str:
    """``; inconclusive on ...: its N runs could not have seen a factor-2 change of pf, about M would`` and the
    events without a design point (not checked), or ''."""
    if f"{prefix}_event_verdict" not in ds:
        return ""
    verdicts = ds[f"{prefix}_event_verdict"].values
    unchecked = [k for k in np.flatnonzero(verdicts == INCONCLUSIVE) if not np.isfinite(
        ds[f"{prefix}_pf_change"].values[k])]
    blind = [k for k in np.flatnonzero(verdicts == INCONCLUSIVE) if k not in unchecked]
    text = ""
    for k in blind[:WORST]:
        needed = float(ds[f"{prefix}_runs_needed"].values[k])
        text += (f"; inconclusive on {_event(ds, prefix, k)}: its {int(ds[f'{prefix}_event_runs'].values[k])} runs "
                 "could not have seen a factor-2 change of pf, " + (
                     f"about {number(int(needed))} would (verify.reliability_max_runs)" if np.isfinite(needed) else
                     "and no number would: the importance sample itself is too small (the analysis's n_samples)"))
    if unchecked:
        text += (f"; not checked: {', '.join(_event(ds, prefix, k) for k in unchecked[:WORST])} (no design point: "
                 "the threshold is out of the output's reach, or the analysis found none)")
    return text


def _propagation(ds: xr.Dataset, name: str, prefix: str, code: int) -> Verdict:
    """The outputs' means and stds the simulator's anchored ones move most, in combined half-widths, flagged first."""
    cases = []
    for key in ("mean", "std"):
        ratio, flag = ds[f"{prefix}_{key}_error_ratio"], ds[f"{prefix}_{key}_flag"]
        for i in range(ratio.size):
            at = dict(zip(ratio.dims, (int(n) for n in np.unravel_index(i, ratio.shape))))
            cases.append((int(flag.values.ravel()[i]), float(ratio.values.ravel()[i]), key, at))
    cases.sort(key=lambda c: (c[0] == 0, -np.nan_to_num(c[1], nan=np.inf)))
    flagged = [f"{key} of {_output_position(ds[f'{prefix}_{key}_flag'], at)}" for flag, _, key, at in cases if flag]
    worst = cases[0]
    statement = ((f"flagged: {', '.join(flagged[:WORST])}{', ...' if len(flagged) > WORST else ''}: " if flagged
                  else "") + f"the surrogate's Monte Carlo mean and std differ from the simulator's (control variates "
                 f"on {int(ds[f'{prefix}_runs'])} simulator runs of its {int(ds[f'{prefix}_sample_size'])} points) by "
                 f"at most {worst[1]:.2f} combined half-widths ({worst[2]} of "
                 f"{_output_position(ds[f'{prefix}_{worst[2]}_flag'], worst[3])})")
    rows = []
    for flag, ratio, key, at in cases[:WORST]:
        interval = ds[f"{prefix}_{key}_simulator_interval"].isel(at).values
        rows.append((Cell(f"{key} of {_output_position(ds[f'{prefix}_{key}_flag'], at)}"),
                     Cell(f"{number(float(ds[f'{prefix}_{key}_surrogate'].isel(at)), 4)} -> "
                          f"{number(float(ds[f'{prefix}_{key}_simulator'].isel(at)), 4)} [{number(interval[0], 4)}, "
                          f"{number(interval[1], 4)}]"),
                     Cell(number(ratio, 3), flag=BAD if flag else PLAIN)))
    return Verdict.of(name, code, statement, Table("worst moments (flagged first, then by |surrogate - simulator| / "
                                                 "combined half-width)", ("moment", "surrogate -> simulator [interval]",
                                                                          "ratio"), tuple(rows)))


def _output_position(variable: xr.DataArray, at: dict[str, int]) -> str:
    """``y`` (one output: its label) or ``day = 3, well = W2``: the output of a variable on the model's output dims
    at ``at``."""
    from sensitivity.outputs.labels import position_label

    where = [f"{d} = {position_label(variable, d, i)}" for d, i in at.items() if variable.sizes[d] > 1]
    if where:
        return ", ".join(where)
    return position_label(variable, variable.dims[0], 0) if variable.dims else "the output"


def _parameter_worst(ds: xr.Dataset, prefix: str, variables: tuple[str, str], title: str) -> Table:
    """The parameters of the largest ratio of ``variables`` (shift, its scale), largest first."""
    ratio = ds[f"{prefix}_shift_ratio"].values
    shifts, scales = (ds[f"{prefix}_{v}"] for v in variables)
    labels = [str(n) for n in ds["parameter_name"].values]
    rows = tuple((Cell(labels[j]), Cell(number(shifts.values[j])), Cell(number(scales.values[j])),
                  Cell(number(ratio[j], 3), flag=BAD if ratio[j] > 1 else ""))
                 for j in np.argsort(-np.nan_to_num(ratio, nan=-np.inf), kind="stable")[:WORST])
    return Table(f"worst parameters ({title})", ("parameter", *(v.replace("_", " ") for v in variables), "ratio"),
                 rows)


def _sobol(ds: xr.Dataset, name: str, prefix: str, code: int) -> Verdict:
    ratios = {k: ds[f"{prefix}_{k}_error_ratio"].fillna(-np.inf) for k in ("S1", "ST")}  # NaN: a constant output
    index = max(ratios, key=lambda k: float(ratios[k].max()))
    worst = float(ratios[index].max())
    judged = np.concatenate([r.values.ravel() for r in ratios.values()])
    within = float(np.mean(judged[np.isfinite(judged)] <= 1))
    statement = (f"{_index_causes(ds, prefix)}the surrogate's Sobol' indices differ from the simulator's by at most "
                 f"{worst:.2f} sampling half-widths ({where_largest(ratios[index], index)}); {within:.0%} of the "
                 "(index, parameter, output) triples within one")
    rows = [_index_row(ds, prefix, case) for case in _worst_cases(ds, prefix, ratios)]
    table = Table("worst indices (flagged first, then by |surrogate - simulator| / sampling half-width)",
                  ("index", "surrogate - simulator", "ratio", "flagged for"), tuple(rows))
    return Verdict.of(name, code, statement, table)


def _worst_cases(ds: xr.Dataset, prefix: str, ratios: dict[str, xr.DataArray]) -> list[tuple]:
    """``(flag, ratio, index, at)`` of the :data:`WORST` indices to show: the flagged ones first (the verdict's
    causes), then the largest ratios (an index beyond its half-width but within the tolerance is not a failure)."""
    cases = []
    for k, ratio in ratios.items():
        flag = ds[f"{prefix}_{k}_flag"].values.ravel() if f"{prefix}_{k}_flag" in ds else np.zeros(ratio.size, int)
        flat = ratio.values.ravel()
        for i in np.flatnonzero(np.isfinite(flat) | (flag > 0)):
            at = dict(zip(ratio.dims, (int(n) for n in np.unravel_index(i, ratio.shape))))
            cases.append((int(flag[i]), float(flat[i]), k, at))
    return sorted(cases, key=lambda c: (c[0] == 0, -np.nan_to_num(c[1], nan=np.inf)))[:WORST]


def _index_row(ds: xr.Dataset, prefix: str, case: tuple) -> tuple[Cell, ...]:
    """One row of the worst indices: where, the error, its ratio to the half-width and the causes it is flagged for."""
    from sensitivity.analyses.verify.verdict import causes

    flag, value, k, at = case
    ratio = ds[f"{prefix}_{k}_error_ratio"]
    error = ds[f"{prefix}_{k}_error"].isel(at)
    why = ", ".join(causes(np.array([flag]))) if flag else ("no: within the tolerance" if value > 1 else "")
    return (Cell(_position(ratio, k, at)), Cell(number(error.values)), Cell(number(value, 3)),
            Cell(why, flag=BAD if flag else ""))


def where_largest(ratio: xr.DataArray, index: str) -> str:
    """``ST of cloud at year = 2000, lat = 0``: where ``ratio`` (on parameter and the output dims) is largest (a
    single output named by its parameter alone)."""
    at = dict(zip(ratio.dims, (int(i) for i in np.unravel_index(int(np.argmax(ratio.values)), ratio.shape))))
    return _position(ratio, index, at)


def _position(ratio: xr.DataArray, index: str, at: dict[str, int]) -> str:
    from sensitivity.outputs.labels import position_label

    where = [f"{d} = {position_label(ratio, d, i)}" for d, i in at.items() if d != "parameter" and ratio.sizes[d] > 1]
    shown = f"{index} of {position_label(ratio, 'parameter', at['parameter'])}"
    return shown + (f" at {', '.join(where)}" if where else "")


def _index_causes(ds: xr.Dataset, prefix: str) -> str:
    """``on error beyond ... (ST of x3); ranking ... (S1 of x1): `` for the causes of the flagged indices, or ''."""
    from sensitivity.analyses.verify.verdict import CAUSES, causes

    flags = {k: ds[f"{prefix}_{k}_flag"] for k in ("S1", "ST") if f"{prefix}_{k}_flag" in ds}
    if not flags:
        return ""
    seen = causes(np.concatenate([f.values.ravel() for f in flags.values()]))
    named = [f"{WHY[word]} ({', '.join(_flagged(flags, bit))})" for bit, word in CAUSES.items() if word in seen]
    return f"on {'; '.join(named)}: " if named else ""


def _flagged(flags: dict, bit: int) -> list[str]:
    """``ST of x3`` for each (index, parameter) whose flag has ``bit``, at most five."""
    found = []
    for key, flag in flags.items():
        hit = (flag.values & bit).reshape(flag.shape[0], -1).any(axis=1)
        found += [f"{key} of {flag['parameter_name'].values[i]}" for i in np.flatnonzero(hit)]
    return found[:5] + (["..."] if len(found) > 5 else [])


def _flagged_parameters(ds: xr.Dataset, prefix: str) -> str:
    """``flagged: a, b: `` for the parameters whose shift is flagged, or ''."""
    if f"{prefix}_flag" not in ds:
        return ""
    flags = ds[f"{prefix}_flag"].values
    names = [str(n) for n in ds["parameter_name"].values[flags > 0]]
    return f"flagged: {', '.join(names)}: " if names else ""


def _floor_text(ds: xr.Dataset, prefix: str) -> str:
    variable = f"{prefix}_shift_floor"
    return "none" if variable not in ds else ", ".join(f"{n} {v:.3g}" for n, v in zip(ds["parameter_name"].values,
                                                                                    ds[variable].values))
