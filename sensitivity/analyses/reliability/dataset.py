"""The labeled dataset of a reliability analysis and its verdict.

Events are picked output x threshold (``e = i t + j``, :mod:`~sensitivity.analyses.reliability.events`); the
dataset puts them on ``threshold`` and the picked outputs' own dims (``pf(reliability_method, threshold, day)``
for a series), so a fragility curve is ``pf.sel(reliability_method=...)`` along ``threshold``.

Per method (``reliability_method``: ``form``, ``sorm_breitung``, ``sorm_hohenbichler``, ``sorm_tvedt``, then the
sampling methods that ran): ``pf``, the generalised index ``beta = -Phi^-1(pf)``, ``pf_interval`` (sampling
only), ``pf_cov`` and ``evaluations``. Where an event has several distinct design points, a SORM ``pf`` is FORM's
union probability times the ratio of the points' summed SORM and FORM probabilities (exact SORM for one point).

The verdict (``disagrees``: 1 where the method disagrees, 0 where it agrees, -1 not assessed): FORM or SORM agrees
with the sampling reference (importance sampling, else subset simulation, else Monte Carlo) where its ``pf`` lies
in the reference's interval widened by ``rtol`` of the reference's ``pf`` on either side; ``not_assessed`` where
either is missing. The summary says which estimate not to trust where they disagree
(:mod:`~sensitivity.analyses.reliability.summary`).

``design_extrapolated``: whether each design point lies beyond the reach of the surrogate's training inputs
(:mod:`~sensitivity.analyses.reliability.reach`; ``unknown`` without a record of them).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sensitivity.analyses.reliability import form as fm
from sensitivity.analyses.reliability import sorm as sm
from sensitivity.analyses.reliability.form import FormResult, threshold_sensitivity
from sensitivity.analyses.reliability.ensemble import member_spread
from sensitivity.analyses.reliability.events import threshold_derivative
from sensitivity.analyses.reliability.parameter_sensitivity import (beta_sensitivity, distribution_parameters,
                                                                     inverse_units, pf_sensitivity)
from sensitivity.analyses.reliability.reach import REACH_FLAGS, UNKNOWN
from sensitivity.analyses.reliability.sorm import SormResult
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.axes import flat_coords, unstack_output
from sensitivity.outputs.labels import axis_coords, axis_units_attrs, parameter_coords
from sensitivity.outputs.members import member_coords
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

METHOD_DIM = "reliability_method"
#: The SORM formulas reported, as ``reliability_method`` labels.
SORM_METHODS = ("sorm_breitung", "sorm_hohenbichler", "sorm_tvedt")
#: Sampling references of the verdict, preferred first.
REFERENCES = ("importance_sampling", "subset_simulation", "monte_carlo")
NOT_ASSESSED, AGREES, DISAGREES = -1, 0, 1
#: CF flag meanings of FORM's start status and SORM's status.
FORM_FLAGS = {fm.CONVERGED: "converged", fm.MAX_ITERATIONS: "max_iterations", fm.LINE_SEARCH_FAILED: "line_search_failed",
              fm.ZERO_GRADIENT: "zero_gradient", fm.NOT_FINITE: "not_finite", fm.SINGULAR_STEP: "singular_step",
              fm.NOT_STARTED: "not_started"}
SORM_FLAGS = {sm.OK: "ok", sm.NO_DESIGN_POINT: "no_design_point", sm.CURVATURE_TOO_NEGATIVE: "curvature_too_negative",
              sm.NOT_FINITE: "not_finite"}


def _flags(values: dict[int, str]) -> dict[str, Any]:
    return {"flag_values": np.array(list(values), np.int8), "flag_meanings": " ".join(values.values())}


def reliability_dataset(space: ParameterSpace, plan: Any, result: FormResult, second: SormResult | None,
                        sampled: dict[str, tuple], member_pf: dict[str, np.ndarray] | None, *, seed: int,
                        reach: np.ndarray | None = None, training_record: str = "none") -> xr.Dataset:
    """Build the dataset of :func:`~sensitivity.analyses.reliability.driver.reliability` (module notes).

    Parameters
    ----------
    plan
        The :class:`~sensitivity.analyses.reliability.driver.Plan` (transform, picked outputs, settings).
    result, second
        FORM's result and SORM's (None when SORM did not run).
    sampled
        ``{method: (pf [E], interval [E, 2], cov [E], evaluations)}``.
    member_pf
        ``{method: [K, E]}`` the ``pf`` of every member of an ensemble (FORM, and the sampling methods that
        estimate them, :mod:`~sensitivity.analyses.reliability.ensemble`), or None.
    reach, training_record
        ``[E, D]`` :func:`~sensitivity.analyses.reliability.reach.training_reach` flags of the design points (None:
        every one unknown), and what the training inputs were read from.
    """
    s = plan.settings
    t, m = len(s.thresholds), plan.size
    unit = plan.output.flat_units()[0]
    sign = 1.0 if s.direction == "above" else -1.0  # g = sign (T - y)

    def on(a: np.ndarray, *dims: str) -> tuple:
        a = np.asarray(a).reshape(m, t, *np.shape(a)[1:])
        return ("threshold", *dims, "output"), np.moveaxis(a, 0, -1)

    methods = ["form", *(SORM_METHODS if second is not None else ()), *sampled]
    pf = [result.pf] + (_sorm_event_pf(result, second) if second is not None else []) + [v[0] for v in sampled.values()]
    pf = np.stack(pf)
    interval = np.full((len(methods), m * t, 2), np.nan)
    cov = np.full((len(methods), m * t), np.nan)
    evaluations = [result.evaluations] + [int(np.isfinite(result.design_beta).sum())] * (3 if second else 0)
    for k, (name, (_, low_high, c, count)) in enumerate(sampled.items(), start=len(methods) - len(sampled)):
        interval[k], cov[k] = low_high, c
        evaluations.append(count)
    reference = next((r for r in REFERENCES if r in sampled), None)
    disagrees = _verdict(methods, pf, interval, reference, s.rtol)
    if reach is None:
        reach = np.full(result.design_beta.shape, UNKNOWN, dtype=np.int8)

    def per_method(a: np.ndarray, *dims: str) -> tuple:
        a = np.moveaxis(np.asarray(a).reshape(len(methods), m, t, *np.shape(a)[2:]), 1, -1)
        return (METHOD_DIM, "threshold", *dims, "output"), a

    probability = {"units": "1"}
    with np.errstate(divide="ignore", invalid="ignore"):
        generalised = stats.norm.isf(pf)
    dbeta = threshold_sensitivity(result, threshold_derivative(m, s.thresholds, s.direction))
    theta = distribution_parameters(space)
    dbeta_dtheta = beta_sensitivity(result, plan.nataf, space, theta)
    per_theta = axis_units_attrs(inverse_units(theta), "distribution_parameter_inverse")
    per_unit = f"({unit})-1" if unit != "1" else "1"
    low, high = space.bounds.T
    design_x = _design_x(plan.nataf, result.design_u)
    outside = np.any((design_x < low) | (design_x > high), axis=-1) & np.isfinite(result.design_beta)
    punits = axis_units_attrs(list(space.units), "parameter")
    v: dict[str, tuple] = {
        "pf": (*per_method(pf), {"long_name": "probability of failure", **probability}),
        "beta": (*per_method(generalised), {"long_name": "generalised reliability index -Phi^-1(pf)", "units": "1"}),
        "pf_interval": (*per_method(interval, "bound"), {"long_name": f"{s.level:.0%} interval of pf "
                                                         "(sampling methods; NaN for FORM and SORM)", **probability}),
        "pf_cov": (*per_method(cov), {"long_name": "coefficient of variation of the pf estimate", "units": "1"}),
        "evaluations": ((METHOD_DIM,), np.asarray(evaluations, np.int64).astype(np.float64),
                        {"long_name": "points the method evaluated (model or Hessian evaluations)", "units": "1"}),
        "disagrees": (*per_method(disagrees), {
            "long_name": f"FORM/SORM pf outside the {reference or 'sampling'} interval +- {s.rtol:g} of its pf",
            "verdict_reference": reference or "none", "verdict_rtol": float(s.rtol),
            **_flags({NOT_ASSESSED: "not_assessed", AGREES: "agrees", DISAGREES: "disagrees"})}),
        "form_beta": (*on(result.beta), {"long_name": "FORM reliability index of the most probable design point",
                                         "units": "1"}),
        "n_design_points": (*on(result.n_points.astype(np.int32)), {"long_name": "distinct design points", "units": "1"}),
        "several_contribute": (*on(result.several_contribute.astype(np.int8)), {
            "long_name": "more than one design point contributes to pf", **_flags({0: "one", 1: "several"})}),
        "design_beta": (*on(result.design_beta, "design_point"), {"long_name": "reliability index of the design "
                                                                  "point", "units": "1"}),
        "design_pf": (*on(result.design_pf, "design_point"), {"long_name": "Phi(-beta) of the design point",
                                                              **probability}),
        "design_u": (*on(result.design_u, "design_point", "parameter"),
                     {"long_name": "design point in the standard normal space", "units": "1"}),
        "design_x": (*on(design_x, "design_point", "parameter"), {"long_name": "design point", **punits}),
        "design_outside_bounds": (*on(outside.astype(np.int8), "design_point"), {
            "long_name": "design point outside the parameter bounds (the surrogate extrapolates)",
            **_flags({0: "inside", 1: "outside"})}),
        "design_extrapolated": (*on(np.asarray(reach, np.int8), "design_point"), {
            "long_name": "design point beyond the reach of the surrogate's training inputs (outside their box or "
                         "farther from every one than any is from its nearest neighbour)",
            "training_record": training_record, **_flags(REACH_FLAGS)}),
        "alpha": (*on(result.alpha, "design_point", "parameter"),
                  {"long_name": "unit normal at the design point, towards failure (direction cosines)", "units": "1"}),
        "importance": (*on(result.importance, "design_point", "parameter"),
                       {"long_name": "importance factor alpha^2", "units": "1"}),
        "dbeta_dthreshold": (*on(dbeta, "design_point"), {"long_name": "d beta / d threshold at the design point",
                                                          "units": per_unit}),
        "dpf_dthreshold": (*on(pf_sensitivity(result, dbeta)), {"long_name": "d pf / d threshold (FORM)",
                                                                "units": per_unit}),
        "dbeta_ddistribution": (*on(dbeta_dtheta, "design_point", "distribution_parameter"), {
            "long_name": "d beta / d distribution parameter at the design point", **per_theta}),
        "dpf_ddistribution": (*on(pf_sensitivity(result, dbeta_dtheta), "distribution_parameter"), {
            "long_name": "d pf / d distribution parameter (FORM)", **per_theta}),
        "start_status": (*on(result.start_status.astype(np.int8), "start"), {
            "long_name": "FORM status of each start", **_flags(FORM_FLAGS)}),
        "start_beta": (*on(result.start_beta, "start"), {"long_name": "reliability index found from each start",
                                                         "units": "1"}),
        "start_iterations": (*on(result.start_iterations.astype(np.int32), "start"),
                             {"long_name": "iHL-RF / SQP iterations of each start", "units": "1"}),
        "start_output": (*on(np.asarray(s.thresholds)[np.arange(m * t) % t, None] - sign * result.start_g, "start"),
                         {"long_name": "output at the last iterate of each start", "units": unit}),
        "start_gradient_norm": (*on(result.start_gradient_norm, "start"), {
            "long_name": "norm of the output's gradient in the standard normal space at the last iterate of each "
                         "start", "units": unit}),
    }
    if second is not None:
        v["curvature"] = (*on(second.curvatures, "design_point", "curvature"),
                          {"long_name": "principal curvature of the limit state at the design point (positive: "
                                        "away from the origin)", "units": "1"})
        v["sorm_status"] = (*on(second.status.astype(np.int8), "design_point"), {
            "long_name": "SORM status of each design point", **_flags(SORM_FLAGS)})
    if member_pf is not None:
        per_member, std, both, spread_of = member_spread(methods, member_pf, pf, interval, reference, s.level)
        k = per_member.shape[1]
        v["pf_member"] = ((METHOD_DIM, "member", *on(pf[0])[0]),
                          np.moveaxis(per_member.reshape(len(methods), k, m, t), 2, -1),
                          {"long_name": "pf of each member (FORM, importance sampling, Monte Carlo; NaN for SORM "
                                        "and subset simulation)", **probability})
        v["pf_surrogate_std"] = (*per_method(std), {"long_name": "standard deviation of the members' pf "
                                                                 "(surrogate uncertainty)", **probability})
        v["pf_combined_interval"] = (*on(both, "bound"), {
            "long_name": f"{s.level:.0%} interval of the {reference or 'form'} pf with the surrogate's spread "
                         f"(the members' {spread_of} pf)", **probability})
    ds = xr.Dataset({name: xr.Variable(dims, values, attrs) for name, (dims, values, attrs) in v.items()})
    coords = {**axis_coords(METHOD_DIM, methods), **parameter_coords(space.names, space.units),
              "threshold": xr.Variable("threshold", np.asarray(s.thresholds), {"long_name": "threshold of the output",
                                                                               "units": unit}),
              "bound": xr.Variable("bound", np.array(["low", "high"], dtype=object), {"long_name": "interval bound"}),
              **axis_coords("distribution_parameter", [q.name for q in theta], [q.units for q in theta]),
              "distribution_parameter_inverse_units": xr.Variable("distribution_parameter", np.asarray(
                  inverse_units(theta), dtype=object), {"long_name": "units of a sensitivity to the parameter"})}
    if member_pf is not None:
        coords.update(member_coords(k))
    ds = ds.assign_coords(coords).assign_coords(flat_coords(plan.output))
    quantity = "output" if plan.functionals is None else "functional"
    ds.attrs.update(direction=s.direction, failure=f"{quantity} {'>' if s.direction == 'above' else '<'} threshold",
                    methods=" ".join(s.methods), union=result.union, seed=int(seed), starts=int(s.starts),
                    output_selection=_selection(plan))
    if result.note:
        ds.attrs["form_note"] = result.note
    return unstack_output(ds, plan.output)


def _selection(plan: Any) -> str:
    """What the events are about, as one line: ``dim=label, ...`` (``all``), or the functionals' names."""
    if plan.functionals is not None:
        return "functionals " + ", ".join(plan.functionals.names)
    return ", ".join(f"{k}={val}" for k, val in plan.settings.output.items()) or "all"


def _design_x(nataf: Any, design_u: np.ndarray) -> np.ndarray:
    flat = design_u.reshape(-1, design_u.shape[-1])
    x = np.full(flat.shape, np.nan)
    ok = np.all(np.isfinite(flat), axis=1)
    if ok.any():
        x[ok] = nataf.to_physical(flat[ok])
    return x.reshape(design_u.shape)


def _sorm_event_pf(result: FormResult, second: SormResult) -> list[np.ndarray]:
    """Per event: FORM's union pf times the ratio of the summed SORM and FORM pf of its design points."""
    first = np.nansum(result.design_pf, axis=1)
    out = []
    for per_point in (second.pf_breitung, second.pf_hohenbichler, second.pf_tvedt):
        with np.errstate(divide="ignore", invalid="ignore"):
            bad = np.any(np.isnan(per_point) & np.isfinite(result.design_beta), axis=1)
            ratio = np.nansum(per_point, axis=1) / first
        out.append(np.where(bad | ~np.isfinite(result.pf), np.nan, result.pf * ratio))
    return out


def _verdict(methods: list[str], pf: np.ndarray, interval: np.ndarray, reference: str | None,
             rtol: float) -> np.ndarray:
    flags = np.full(pf.shape, NOT_ASSESSED, dtype=np.int8)
    if reference is None:
        return flags
    r = methods.index(reference)
    low = interval[r, :, 0] - rtol * pf[r]
    high = interval[r, :, 1] + rtol * pf[r]
    for k, name in enumerate(methods):
        if name in REFERENCES:
            continue
        ok = np.isfinite(pf[k]) & np.isfinite(pf[r]) & np.isfinite(low) & np.isfinite(high)
        flags[k] = np.where(ok, np.where((pf[k] >= low) & (pf[k] <= high), AGREES, DISAGREES), NOT_ASSESSED)
    return flags
