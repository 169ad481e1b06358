"""The multifidelity study's result as a labeled dataset (``multifidelity.nc``): every estimate anchored on the
simulator beside the surrogate's own, both with intervals, the bias the anchor corrected with its verdict, the
allocation and the achieved variance reduction.

Variables (``output`` is put back on the model's own dims by :func:`~sensitivity.outputs.axes.unstack_output`):

- ``S1``, ``ST`` ``(parameter, output)`` and ``output_mean``, ``output_variance`` ``(output)``: the simulator-anchored
  estimates; ``<name>_interval`` beside each (``bound``); ``<name>_surrogate`` and ``<name>_surrogate_interval``:
  the surrogate alone on the whole design; ``<name>_simulator_only``: the simulator's runs alone;
- ``<name>_bias``: anchored minus surrogate-only (what the surrogate got wrong), ``<name>_bias_se`` its standard
  error (of the two estimates as if independent: their positive correlation makes it an upper bound),
  ``<name>_agreement`` (fails, holds or inconclusive by the rule :mod:`sensitivity.analyses.verify` judges by,
  :func:`sensitivity.analyses.agreement.outcome`: fails where ``|bias| > max(z se, tolerance)``, inconclusive where
  the se could not have seen a factor-2 error; the tolerance of an index is
  :data:`~sensitivity.analyses.agreement.INDEX_TOLERANCE`) and ``<name>_bias_significant`` (1 where it fails);
- ``simulator_constant`` ``(output)``: 1 where the simulator's runs do not vary (zero variance: the indices are
  undefined, NaN; the verdict leaves such outputs out rather than blame the surrogate);
- ``<name>_variance_reduction``: ``1 - Var[anchored] / Var[simulator-only at the same budget]``, measured (bootstrap
  for the indices, the estimator's variance for the moments); ``predicted_variance_reduction`` and ``correlation``
  ``(output)``: the allocation's prediction and the pilot's correlation; ``S1_term_correlation``,
  ``ST_term_correlation`` ``(parameter, output)``: the correlation of the simulator's and the surrogate's per-row
  numerator terms on the shared rows, which sets each index's variance reduction (``1 - rho^2 (N - n) / N``): where a
  parameter barely moves an output the surrogate's error dominates its terms, ``rho`` is low and the anchored
  interval is as wide as the simulator's ``n`` rows allow (wider than the surrogate-only one, which ignores that
  error);
- with an ensemble surrogate, beside each surrogate-only estimate ``X_surrogate``: ``X_surrogate_member`` (each
  member's own on the same design), ``X_surrogate_member_mean``, ``X_surrogate_surrogate_std`` (their sd) and
  ``X_surrogate_combined_interval`` (its sampling interval widened by the members' spread,
  :func:`sensitivity.outputs.members.spread_variables`), the ``member`` coordinate and ``ensemble_members``;
- attributes: ``n_sim_runs``, ``n_sim_rows``, ``n_sur_rows``, ``n_sur_optimal``, ``budget``, ``pilot_runs``,
  ``cost_sim`` / ``cost_sur`` [s per run, measured], ``cost_ratio`` (the allocation's) and ``cost_ratio_source``
  (``given``: ``cost_ratio`` set, the allocation repeats; ``measured``: this run's, on this machine now),
  ``n_sim_optimal`` (the allocation's optimum of simulator row blocks), ``allocation_note`` (why the row blocks that
  ran depart from the optimum), ``surrogate_worthwhile`` (the row blocks that ran predicted better than the simulator
  alone on the whole budget), ``verdict`` (``bias significant``, ``no significant bias`` or ``inconclusive``, of the
  outputs that vary), ``method``, ``references``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sensitivity.analyses.agreement import (FAILS, HOLDS, INCONCLUSIVE, INDEX_TOLERANCE, MOMENT_TOLERANCE, VERDICT,
                                            Power, outcome, overall)
from sensitivity.analyses.multifidelity.checks import z_value
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.axes import flat_coords, unstack_output
from sensitivity.outputs.labels import axis_coords, axis_units_attrs
from sensitivity.outputs.members import with_member_spread
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

METHOD = ("multifidelity: the surrogate as control variate of the simulator on one pick-freeze design (MFMC mean and "
          "variance, Peherstorfer et al. 2016; multifidelity Sobol' indices, Qian et al. 2018); allocation from "
          "pilot runs")
REFERENCES = "doi:10.1137/15M1046472 doi:10.1137/17M1151006 doi:10.1016/j.jcp.2020.109257"

#: The estimates of the dataset and their long names.
QUANTITIES = {"S1": "first-order Sobol' index", "ST": "total Sobol' index", "output_mean": "output mean",
              "output_variance": "output variance"}


def _tolerance(name: str, anchored: np.ndarray, values: dict[str, tuple]) -> tuple[float | np.ndarray, np.ndarray]:
    """The tolerance and the scale of a factor-2 error of quantity ``name``
    (:func:`~sensitivity.analyses.agreement.outcome`): an index's
    :data:`~sensitivity.analyses.agreement.INDEX_TOLERANCE` and itself; the mean's
    :data:`~sensitivity.analyses.agreement.MOMENT_TOLERANCE` of the output's standard deviation and that standard
    deviation (a mean near zero has no factor-2 scale of its own); the variance's ``2 MOMENT_TOLERANCE`` of itself
    and itself."""
    if name in ("S1", "ST"):
        return INDEX_TOLERANCE, anchored
    std = np.sqrt(np.maximum(values["output_variance"][0], 0.0))
    if name == "output_mean":
        return MOMENT_TOLERANCE * std, std
    return 2 * MOMENT_TOLERANCE * std**2, anchored


def study_dataset(output: OutputSpec | None, space: ParameterSpace, est: dict[str, Any], plan: Any, s: Any, *,
                  n_sim: int, n_sur: int, cost_sim: float, cost_sur: float, cost_ratio: float,
                  constant: np.ndarray | None = None) -> xr.Dataset:
    """The dataset of :func:`sensitivity.analyses.multifidelity.study.multifidelity` (see the module)."""
    g = len(space)
    m = est["mean"].estimate.shape[0]
    spec = output if output is not None else OutputSpec.generic((m,))
    z = z_value(s.level)
    n_mc = s.budget // (g + 2)  # simulator-only row blocks at the same budget
    mf, sur = est["sobol"], est["sobol_surrogate"]
    values = {
        "S1": (mf.S1, mf.S1_interval, mf.S1_se, sur.S1, sur.S1_interval, sur.S1_se, mf.simulator_only["S1"],
               mf.variance_ratio_bootstrap["S1"]),
        "ST": (mf.ST, mf.ST_interval, mf.ST_se, sur.ST, sur.ST_interval, sur.ST_se, mf.simulator_only["ST"],
               mf.variance_ratio_bootstrap["ST"]),
    }
    for name, key in (("output_mean", "mean"), ("output_variance", "variance")):
        a, b = est[key], est[f"{key}_surrogate"]
        values[name] = (a.estimate, a.interval, a.standard_error, b.estimate, b.interval, b.standard_error,
                        a.simulator_only, a.variance_ratio)
    units = list(spec.flat_units())
    data: dict[str, Any] = {}
    for name, (anchored, interval, se, alone, alone_interval, alone_se, sim_only, ratio) in values.items():
        dims = ("parameter", "output") if name in ("S1", "ST") else ("output",)
        attrs = {"units": "1"} if name in ("S1", "ST") else axis_units_attrs(units, "output",
                                                                            squared=name == "output_variance")
        long = QUANTITIES[name]
        bias = anchored - alone
        bias_se = np.sqrt(se**2 + alone_se**2)
        data[name] = (dims, anchored, {"long_name": f"{long}, simulator-anchored", **attrs})
        data[f"{name}_interval"] = ((*dims, "bound"), interval, {"long_name": f"{long}, anchored, interval", **attrs})
        data[f"{name}_surrogate"] = (dims, alone, {"long_name": f"{long}, surrogate only", **attrs})
        data[f"{name}_surrogate_interval"] = ((*dims, "bound"), alone_interval,
                                              {"long_name": f"{long}, surrogate only, interval", **attrs})
        data[f"{name}_simulator_only"] = (dims, sim_only, {"long_name": f"{long}, the simulator's runs alone",
                                                           **attrs})
        data[f"{name}_bias"] = (dims, bias, {"long_name": f"{long}: anchored minus surrogate-only (the surrogate's "
                                                          "bias the simulator corrected)", **attrs})
        data[f"{name}_bias_se"] = (dims, bias_se, {"long_name": f"{long}: standard error of the bias", **attrs})
        tolerance, scale = _tolerance(name, anchored, values)
        verdict = outcome(bias, bias_se, scale, tolerance, Power(s.level))
        data[f"{name}_bias_significant"] = (dims, (verdict == FAILS).astype(np.int8), {
            "long_name": f"{long}: the surrogate's bias exceeds {z:.3g} standard errors and the tolerance "
                         f"{tolerance if np.ndim(tolerance) == 0 else 'of the output'}", "units": "1",
            "flag_values": np.array([0, 1], np.int8), "flag_meanings": "not_significant significant"})
        data[f"{name}_agreement"] = (dims, verdict, {
            "long_name": f"{long}: the surrogate agrees (holds), is biased (fails), or the simulator's runs could not "
                         "have seen a factor-2 error (inconclusive)", **VERDICT})
        with np.errstate(invalid="ignore"):
            reduction = 1.0 - np.asarray(ratio) * (n_sim / n_mc)
        data[f"{name}_variance_reduction"] = (dims, reduction, {
            "long_name": f"{long}: 1 - variance of the anchored estimate over that of the simulator alone at the "
                         "same budget (measured)", "units": "1"})
    for name, key in (("S1", "main"), ("ST", "total")):
        data[f"{name}_term_correlation"] = (("parameter", "output"), mf.correlation[key], {
            "long_name": f"{QUANTITIES[name]}: correlation of the simulator's and the surrogate's per-row numerator "
                         "terms on the shared rows", "units": "1"})
    data["correlation"] = (("output",), plan.rho, {"long_name": "pilot correlation of simulator and surrogate",
                                                   "units": "1"})
    data["predicted_variance_reduction"] = (("output",), plan.variance_reduction, {
        "long_name": "variance reduction of the mean predicted by the allocation (MFMC)", "units": "1"})
    coords = {**axis_coords("parameter", space.names, space.units), **flat_coords(spec),
              **axis_coords("bound", ["low", "high"])}
    constant = np.zeros(m, bool) if constant is None else np.asarray(constant, bool)
    data["simulator_constant"] = (("output",), constant.astype(np.int8), {
        "long_name": "the simulator's runs do not vary in this output (zero variance: its Sobol' indices are "
                     "undefined, NaN, and the verdict leaves it out)", "units": "1",
        "flag_values": np.array([0, 1], np.int8), "flag_meanings": "varies constant"})
    agreement = overall(np.concatenate([np.asarray(data[f"{q}_agreement"][1])[..., ~constant].ravel()
                                        for q in QUANTITIES]))  # of the outputs that vary
    ds = xr.Dataset(data, coords=coords, attrs={
        "n_sim_runs": n_sim * (g + 2), "n_sim_rows": n_sim, "n_sur_rows": n_sur, "n_sur_optimal": int(plan.n_sur),
        "budget": int(s.budget), "pilot_runs": int(s.pilot_blocks(g) * (g + 2)), "cost_sim": float(cost_sim),
        "cost_sur": float(cost_sur), "cost_ratio": float(cost_ratio),
        "n_sim_optimal": int(plan.n_sim), "allocation_note": str(getattr(plan, "note", "")),
        "cost_ratio_source": "given" if s.cost_ratio else "measured",
        "surrogate_worthwhile": int(plan.worthwhile), "level": float(s.level),
        "verdict": {FAILS: "bias significant", HOLDS: "no significant bias", INCONCLUSIVE: "inconclusive"}[agreement],
        "method": METHOD, "references": REFERENCES})
    if "members" in est:  # an ensemble: each member's surrogate-only estimates, their spread, the combined intervals
        members = [xr.Dataset({f"{q}_surrogate": (ds[f"{q}_surrogate"].dims, values)
                               for q, values in _surrogate_only(member).items()}, coords=ds.coords)
                   for member in est["members"]]
        ds = with_member_spread(ds, members, s.level, names=[f"{q}_surrogate" for q in QUANTITIES])
    return unstack_output(ds, spec)


def _surrogate_only(est: dict[str, Any]) -> dict[str, np.ndarray]:
    """The surrogate-only estimates of one surrogate (an ensemble's member), by the dataset's quantity names."""
    return {"S1": est["sobol_surrogate"].S1, "ST": est["sobol_surrogate"].ST,
            "output_mean": est["mean_surrogate"].estimate, "output_variance": est["variance_surrogate"].estimate}
