"""The labeled dataset of a data-worth study, on the model's own output dims.

Variables (``F`` forecasts on ``forecast``, labels in ``forecast_name``, units in ``forecast_units``):

* ``forecast_value(forecast)``, ``prior_variance``, ``posterior_variance``, ``variance_reduction``;
* ``prior_covariance(parameter_i, parameter_j)``: the prior the analysis used [parameter units squared];
* ``contribution(parameter, forecast)``: the drop of the posterior variance were the parameter known, with
  ``posterior_variance_parameter_known`` and ``prior_variance_parameter_known``;
* ``removed_worth(forecast, *dims)`` and ``added_worth(forecast, *dims)``: the increase (decrease) of each
  forecast's posterior variance when the observation is removed (the candidate is added), on the model's output dims
  (NaN where an output is no such observation), or on the grouping dim when observations or candidates are grouped;
* the greedy designs on ``(design, step)``: ``design_choice`` (the chosen group's name), ``design_variance(design,
  step, forecast)``, ``design_log_det``, ``design_trace``;
* with posterior draws: ``averaged_prior_variance``, ``averaged_posterior_variance``, ``averaged_added_worth``,
  ``averaged_removed_worth`` and the verdict ``linear_disagrees(forecast)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sensitivity.analyses.worth.plan import Plan, WorthSettings
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.axes import own_coords, unstack_output
from sensitivity.outputs.labels import axis_coords, axis_units_attrs, matrix_coords, parameter_coords
from sensitivity.outputs.spec import FLAT
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

FORECAST = "forecast"


def worth_dataset(study: Plan, settings: WorthSettings, space: ParameterSpace, linear: dict,
                  averaged: dict | None, *, seed: int) -> xr.Dataset:
    """Assemble the dataset of :func:`~sensitivity.analyses.worth.driver.worth` (no math here)."""
    fn = study.functionals
    units = axis_units_attrs(list(fn.units), FORECAST)
    squared = axis_units_attrs(list(fn.units), FORECAST, squared=True)
    problem = linear["problem"]
    variables: dict[str, Any] = {
        "forecast_value": ((FORECAST,), linear["forecast"], {"long_name": "forecast at the best fit", **units}),
        "prior_variance": ((FORECAST,), problem.prior_variance, {"long_name": "prior forecast variance", **squared}),
        "posterior_variance": ((FORECAST,), problem.posterior_variance,
                               {"long_name": "posterior forecast variance (linear, at the best fit)", **squared}),
        "variance_reduction": ((FORECAST,), problem.variance_reduction,
                               {"long_name": "fraction of the prior forecast variance the data remove", "units": "1"}),
        "prior_covariance": (("parameter_i", "parameter_j"), problem.prior_covariance, {
            "long_name": "prior parameter covariance the analysis used",
            **axis_units_attrs(list(space.units), "parameter", squared=True)}),
    }
    if linear.get("contributions") is not None:
        c = linear["contributions"]
        pf = ("parameter", FORECAST)
        variables.update(
            contribution=(pf, c.contribution, {"long_name": "drop of the posterior forecast variance were the "
                                                            "parameter known", **squared}),
            posterior_variance_parameter_known=(pf, c.posterior_variance, {
                "long_name": "posterior forecast variance with the parameter known", **squared}),
            prior_variance_parameter_known=(pf, c.prior_variance, {
                "long_name": "prior forecast variance with the parameter known", **squared}))
    ds = xr.Dataset(variables, coords={**axis_coords(FORECAST, list(fn.names), list(fn.units)),
                                       **parameter_coords(space.names, space.units),
                                       **matrix_coords("parameter", space.names, space.units)})
    ds["forecast_name"].attrs["description"] = "; ".join(f"{n}: {d}" for n, d in zip(fn.names, fn.long_names))
    worth = {"added_worth": (linear["added"].worth, study.candidates, settings.group_candidates_by,
                             "decrease of the posterior forecast variance when the candidate is added")}
    if linear["removed"] is not None:
        worth["removed_worth"] = (linear["removed"].worth, study.observed, settings.group_observations_by,
                                  "increase of the posterior forecast variance when the observation is removed")
    if averaged is not None:
        for key in ("added_worth", "removed_worth"):
            if key in averaged:
                flat, groups, text = worth[key][1:]
                worth[f"averaged_{key}"] = (averaged[key], flat, groups, f"{text}, averaged over posterior draws")
    for name, (value, flat, groups, text) in worth.items():
        ds = ds.merge(_on_output_dims(study, value, flat, groups, name, {"long_name": text, **squared}),
                      compat="override")
    ds = ds.merge(_designs(linear["designs"], fn.names, squared), compat="override")
    if averaged is not None:
        ds = ds.assign(_averaged(problem, averaged, settings.rtol, squared))
    ds.attrs.update(candidate_sigma=float(settings.candidate_sigma),
                    candidate_relative_sigma=float(settings.candidate_relative_sigma),
                    group_observations_by=str(settings.group_observations_by),
                    group_candidates_by=str(settings.group_candidates_by), n_observed=int(study.observed.size),
                    n_candidates=int(study.candidates.size), seed=str(seed),
                    posterior_log_det=float(problem.log_det_posterior),
                    posterior_trace=float(problem.trace_posterior))
    return ds


def _on_output_dims(study: Plan, value: np.ndarray, flat: np.ndarray, group_by: str | None,
                    name: str, attrs: dict) -> xr.Dataset:
    """``value [n_groups, F]`` on the model's dims (ungrouped) or on the grouping dim ``group_by`` (whose labels
    name the groups, in the order of their coordinates), NaN where nothing is."""
    spec = study.spec
    if group_by is None:
        full = np.full((len(study.functionals), spec.size), np.nan)
        full[:, flat] = value.T
        ds = xr.Dataset({name: ((FORECAST, FLAT), full, attrs)})
        return unstack_output(ds, spec) if not spec.is_flat else ds.assign_coords(
            {k: v for k, v in own_coords(spec).items()})
    dim = spec.dims[spec.dim_names.index(group_by)]
    axis = spec.dim_names.index(group_by)
    present = np.unique(np.unravel_index(flat, spec.shape)[axis])  # the groups' coordinates, as in plan._groups
    full = np.full((len(study.functionals), dim.size), np.nan)
    full[:, present] = value.T
    coords = {k: v for k, v in own_coords(spec).items() if k == dim.name or k.startswith(f"{dim.name}_")}
    return xr.Dataset({name: ((FORECAST, dim.name), full, attrs)}, coords=coords)


def _designs(designs: list, forecasts: tuple[str, ...], squared: dict) -> xr.Dataset:
    """The greedy designs on ``(design, step)``, padded with NaN / '' where a design stopped early."""
    k = max((len(d.chosen) for d in designs), default=0)
    shape = (len(designs), k)
    choice = np.full(shape, "", dtype=object)
    variance = np.full(shape + (len(forecasts),), np.nan)
    logdet, trace = np.full(shape, np.nan), np.full(shape, np.nan)
    for i, d in enumerate(designs):
        n = len(d.chosen)
        choice[i, :n], variance[i, :n], logdet[i, :n], trace[i, :n] = d.chosen, d.variance, d.log_det, d.trace
    names = [d.forecast or d.criterion for d in designs]
    coords = {**axis_coords("design", names),
              "step": ("step", np.arange(1, k + 1, dtype=np.int32), {"long_name": "design step", "units": "1"}),
              "design_criterion": ("design", np.array([d.criterion for d in designs], dtype=object),
                                   {"long_name": "what each step of the design minimises"})}
    return xr.Dataset({
        "design_choice": (("design", "step"), choice, {"long_name": "the candidate (group) chosen at each step"}),
        "design_variance": (("design", "step", FORECAST), variance,
                            {"long_name": "posterior forecast variance after each step", **squared}),
        "design_log_det": (("design", "step"), logdet,
                           {"long_name": "log det of the posterior parameter covariance after each step",
                            "units": "1"}),
        "design_trace": (("design", "step"), trace,
                         {"long_name": "trace of the posterior parameter covariance after each step"}),
    }, coords=coords)


def _averaged(problem, averaged: dict, rtol: float, squared: dict) -> dict[str, Any]:
    """The posterior-averaged variances and the verdict against the linear ones."""
    linear_std, averaged_std = np.sqrt(problem.posterior_variance), np.sqrt(averaged["posterior_variance"])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = linear_std / averaged_std
    disagrees = ~(np.abs(ratio - 1.0) <= rtol)
    return {
        "averaged_prior_variance": ((FORECAST,), averaged["prior_variance"], {
            "long_name": "prior forecast variance, linearised at each posterior draw and averaged", **squared}),
        "averaged_posterior_variance": ((FORECAST,), averaged["posterior_variance"], {
            "long_name": "posterior forecast variance, linearised at each posterior draw and averaged", **squared}),
        "linear_std_ratio": ((FORECAST,), ratio, {
            "long_name": "linear posterior forecast std over the posterior-averaged one", "units": "1"}),
        "linear_disagrees": ((FORECAST,), disagrees.astype(np.int8), {
            "long_name": "the linear analysis at the best fit disagrees with the posterior-averaged one",
            "units": "1", "flag_values": np.array([0, 1], np.int8), "flag_meanings": "agrees disagrees",
            "rtol": float(rtol), "n_draws": int(averaged["n_draws"])}),
    }
