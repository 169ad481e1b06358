"""The calibration result as a labeled dataset: the variables of ``calibration.nc`` and their CF attributes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sensitivity.analyses.calibration.iteration import Fits, History
from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.calibration.problem import Problem
from sensitivity.analyses.calibration.solvers import STATUS_MESSAGES, Status
from sensitivity.analyses.calibration.statistics import (SE_NO_DEGREES_OF_FREEDOM, SE_OK, SE_RANK_DEFICIENT,
                                                         REJECTED, Posterior, at_bound, correlation, delta_method_std,
                                                         parameter_interval)
from sensitivity.outputs.labels import axis_units_attrs, cost_units, matrix_coords, output_coords, parameter_coords
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


@dataclass(frozen=True)
class Labels:
    """Names and units of the two labeled axes."""

    names: list[str]
    punits: Sequence[str] | None
    onames: list[str]
    ounits: Sequence[str] | None


@dataclass(frozen=True)
class _Units:
    """CF attributes of variables on the parameter or output axis (:func:`sensitivity.outputs.labels.units_attrs`)."""

    labels: Labels
    known_noise: bool

    def param(self, long_name: str) -> dict:
        return {"long_name": long_name, **axis_units_attrs(self.labels.punits, "parameter")}

    def param_squared(self, long_name: str) -> dict:
        return {"long_name": long_name, **axis_units_attrs(self.labels.punits, "parameter", squared=True)}

    def out(self, long_name: str) -> dict:
        return {"long_name": long_name, **axis_units_attrs(self.labels.ounits, "output")}

    def cost(self, long_name: str) -> dict:
        """Whitened squares are dimensionless; unweighted ones carry squared output units."""
        return {"long_name": long_name, **cost_units(self.labels.ounits, whitened=self.known_noise)}


def unidentified_text(null_space: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """``[K]`` strings ``"d(a, b) ~ (+1, -0.5)"`` per undetermined direction (``; ``-joined), '' when none.

    Components below 1e-6 of the largest are left out, so a direction names only the parameters it moves.
    """
    text = []
    for directions in null_space:
        parts = []
        for d in directions[np.all(np.isfinite(directions), axis=1)]:
            moved = np.flatnonzero(np.abs(d) > 1e-6)
            parts.append(f"d({', '.join(names[i] for i in moved)}) ~ ({', '.join(f'{d[i]:+.4g}' for i in moved)})")
        text.append("; ".join(parts))
    return np.array(text, dtype=object)


def _one(long_name: str, **extra) -> dict:
    """Attributes of a dimensionless variable."""
    return {"long_name": long_name, "units": "1", **extra}


def to_dataset(problem: Problem, fits: Fits, history: History | None, post: Posterior, x0: np.ndarray,
               minimum: np.ndarray, labels: Labels, settings: dict, damping_label: str,
               max_delta_cost: float) -> xr.Dataset:
    """The dataset :func:`~sensitivity.analyses.calibration.calibrate` returns (see there for its variables);
    ``damping_label`` names what ``history_damping`` holds for the solver used, ``max_delta_cost`` the largest cost
    above the best at which a start counted as a minimum."""
    units = _Units(labels, problem.observations.known_noise)
    data = {**_observation_vars(problem.observations, problem.m, units),
            **_fit_vars(fits, x0, minimum, max_delta_cost, units),
            **_statistics_vars(problem, fits, post, settings["level"], units)}
    if problem.prior_mean is not None:
        prior_cov = problem.prior_covariance
        data["prior_mean"] = (("parameter",), problem.prior_mean, units.param("prior mean"))
        data["prior_std"] = (("parameter",), np.sqrt(np.diag(prior_cov)), units.param("prior standard deviation"))
        data["prior_covariance"] = (("parameter_i", "parameter_j"), prior_cov, units.param_squared("prior covariance"))
        with np.errstate(invalid="ignore"):  # what the data add to the prior, per parameter
            reduction = 1.0 - data["standard_error"][1] / data["prior_std"][1]
        data["prior_std_reduction"] = (("start", "parameter"), reduction, _one(
            "reduction of the prior standard deviation by the data: 1 - standard error / prior std"))
    if history is not None:
        data.update(_history_vars(history, units, damping_label))
    k, n = fits.x.shape
    coords = {
        "start": xr.Variable("start", np.arange(k, dtype=np.int32), _one("start index")),
        "component": xr.Variable("component", np.arange(n, dtype=np.int32), _one("singular component")),
        "bound": xr.Variable("bound", np.array(["low", "high"], dtype=object), {"long_name": "interval bound"}),
        **parameter_coords(labels.names, labels.punits),
        **output_coords(labels.onames, labels.ounits),
        **matrix_coords("parameter", labels.names, labels.punits),
    }
    if history is not None:
        coords["iteration"] = xr.Variable("iteration", np.arange(len(history.cost), dtype=np.int32),
                                          _one("solver iteration (0: start)"))
    attrs = {"title": "calibration", **settings,
             "prior": ("gaussian: N(prior_mean, prior_covariance), within the parameter bounds"
                       if problem.prior_mean is not None else "flat: uniform within the parameter bounds"),
             "log_parameters": " ".join(nm for nm, lg in zip(labels.names, problem.log_mask) if lg),
             "noise": "known (sigma or cov)" if units.known_noise else "unknown (covariance scaled by s^2)",
             "underdetermined": _underdetermined(post, problem.observations.n_observed),
             "aic_bic": "-2 ln L + 2k, -2 ln L + k ln m_observed; Gaussian data likelihood at the estimate, "
                        "k = n parameters (+1 when the noise variance is estimated)"}
    variables = {key: xr.Variable(dims, values, attrs) for key, (dims, values, attrs) in data.items()}
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def _underdetermined(post: Posterior, m_observed: int) -> str:
    """Global summary: how many starts have undefined standard errors, and why ('no' when none)."""
    status = post.error_status
    n = post.covariance.shape[-1]
    if not np.any(status != SE_OK):
        return "no"
    return (f"{int(np.sum(status == SE_RANK_DEFICIENT))} of {status.size} starts rank-deficient "
            f"(rank < {n} parameters, {m_observed} observed outputs), {int(np.sum(status == SE_NO_DEGREES_OF_FREEDOM))}"
            " without degrees of freedom: standard errors undefined (see standard_error_status, unidentified)")


def _observation_vars(obs: ObservationModel, m: int, units: _Units) -> dict:
    observed = np.zeros(m, dtype=np.int8)
    observed[obs.observed] = 1
    return {
        "y_obs": (("output",), obs.y_obs, units.out("observed output")),
        "observation_std": (("output",), obs.observation_std(), units.out("standard deviation of the observation")),
        "observed": (("output",), observed, {"long_name": "output enters the fit",
                                              "flag_values": np.array([0, 1], np.int8),
                                              "flag_meanings": "missing_or_masked observed"}),
    }


def _fit_vars(fits: Fits, x0: np.ndarray, minimum: np.ndarray, max_delta_cost: float, units: _Units) -> dict:
    failed = fits.status == Status.NON_FINITE
    ok = minimum >= 0
    best = int(np.flatnonzero(ok)[np.argmin(fits.cost[ok])]) if ok.any() else -1
    status_flags = {"flag_values": np.array([int(s) for s in Status], dtype=np.int16),
                    "flag_meanings": " ".join(s.name.lower() for s in Status)}
    messages = np.array([STATUS_MESSAGES[int(s)] for s in fits.status], dtype=object)
    return {
        "start_value": (("start", "parameter"), x0, units.param("starting parameter value")),
        "estimate": (("start", "parameter"), np.where(failed[:, None], np.nan, fits.x),
                     units.param("fitted parameter value")),
        "status": (("start",), fits.status.astype(np.int16), {"long_name": "termination status", **status_flags}),
        "message": (("start",), messages, {"long_name": "termination message"}),
        "n_iterations": (("start",), fits.n_iter, _one("solver iterations (trial points after the start)")),
        "cost": (("start",), np.where(failed, np.nan, fits.cost),
                 units.cost("half the squared norm of the whitened residuals, prior rows included")),
        "minimum": (("start",), minimum, _one(
            "index of the distinct minimum reached (-1: failed, -2: rejected start, its cost more than "
            "minima_max_delta_cost above the best)")),
        "best_start": ((), np.int32(best), {"long_name": "start of lowest cost among successful fits (-1: none)"}),
        "n_minima": ((), np.int32(minimum.max() + 1), _one(
            "number of distinct minima within minima_max_delta_cost of the best")),
        "n_rejected": ((), np.int32(np.sum(minimum == REJECTED)), _one(
            "converged starts whose cost lies more than minima_max_delta_cost above the best (not minima)")),
        "minima_max_delta_cost": ((), np.float64(max_delta_cost), units.cost(
            "largest cost above the best at which a start counts as a minimum: chi2.ppf(minima_level, "
            "n_parameters) / 2 (times s^2 when the noise is unknown)")),
        "model_output": (("start", "output"), np.where(failed[:, None], np.nan, fits.values),
                         units.out("model output at the estimate")),
    }


def _statistics_vars(problem: Problem, fits: Fits, post: Posterior, level: float, units: _Units) -> dict:
    obs = problem.observations
    failed = (fits.status == Status.NON_FINITE)
    estimate = np.where(failed[:, None], np.nan, fits.x)
    model_output = np.where(failed[:, None], np.nan, fits.values)
    se, q = post.standard_error, post.quantile(level)
    band_sd = delta_method_std(np.where(failed[:, None, None], np.nan, fits.jacobian), post.band_covariance)
    ps, po, pij = ("start", "parameter"), ("start", "output"), ("start", "parameter_i", "parameter_j")
    return {
        "residual": (po, obs.y_obs[None, :] - model_output, units.out("observation minus model output")),
        "chi2": (("start",), post.chi2, units.cost("sum of squared whitened data residuals")),
        "reduced_chi2": (("start",), post.reduced_chi2, units.cost("chi2 / (m_observed - n_parameters)")),
        "residual_variance": (("start",), post.residual_variance,
                              {"long_name": "factor applied to the covariance (s^2 when sigma is unknown, else 1)"}),
        "aic": (("start",), post.aic, _one("Akaike information criterion -2 ln L + 2 k")),
        "bic": (("start",), post.bic, _one("Bayesian information criterion -2 ln L + k ln m")),
        "covariance": (pij, post.covariance, units.param_squared("parameter covariance (NaN when rank-deficient)")),
        "standard_error": (ps, se, units.param("standard error of the estimate")),
        "at_bound": (ps, at_bound(problem, estimate), {
            "long_name": "estimate held on a bound of the parameter (its standard error and interval are those of "
                         "the unconstrained curvature there: the fit would go beyond the bound)",
            "flag_values": np.array([-1, 0, 1], np.int8), "flag_meanings": "lower inside upper"}),
        "correlation": (pij, correlation(post.covariance), _one("parameter correlation")),
        "parameter_interval": (ps + ("bound",), parameter_interval(estimate, se, problem.log_mask, q),
                               units.param(f"{level:.0%} interval of the parameter (symmetric in log x for "
                                           "log parameters)")),
        "prediction_std": (po, band_sd, units.out("delta-method standard deviation of the model output")),
        "prediction_band": (po + ("bound",), np.stack([model_output - q * band_sd, model_output + q * band_sd], -1),
                            units.out(f"{level:.0%} delta-method band of the model output (no observation noise)")),
        "singular_value": (("start", "component"), post.data_svd.singular_values,
                           _one("singular value of the column-equilibrated weighted data Jacobian")),
        "singular_vector": (("start", "component", "parameter"), post.data_svd.vt,
                            _one("right singular vector in equilibrated parameter space")),
        "rank": (("start",), post.data_rank.astype(np.int32), _one("numerical rank of the weighted data Jacobian")),
        "condition_number": (("start",), post.condition_number,
                             _one("condition number of the column-equilibrated weighted data Jacobian")),
        "identifiability": (ps, post.identifiability, _one(
            "parameter identifiability (Doherty and Hunt 2009)" if problem.prior_mean is None else
            "parameter identifiability relative to the prior (Doherty and Hunt 2009; parameters scaled by their "
            "prior std, solution space where the data outweigh the prior)")),
        "standard_error_status": (("start",), post.error_status, {
            "long_name": "whether the standard errors are defined (rank_deficient: see unidentified)",
            "flag_values": np.array([SE_OK, SE_RANK_DEFICIENT, SE_NO_DEGREES_OF_FREEDOM], np.int8),
            "flag_meanings": "defined rank_deficient no_degrees_of_freedom"}),
        "unidentified": (("start",), unidentified_text(post.null_space, units.labels.names), {
            "long_name": "parameter directions the data do not determine, d(parameters) ~ (...) with the "
                         "largest component +1, one per missing rank ('' when full rank)"}),
        "unidentified_direction": (("start", "null_direction", "parameter"), post.null_space, _one(
            "parameter directions the data do not determine, as numbers: row j of a start beyond its rank, in "
            "parameter units scaled so that the largest component is +1 (NaN rows: determined)")),
    }


def _history_vars(history: History, units: _Units, damping: str) -> dict:
    si = ("start", "iteration")
    return {
        "history_parameter": (si + ("parameter",), np.stack(history.parameters, axis=1),
                              units.param("parameter value after the iteration")),
        "history_cost": (si, np.stack(history.cost, axis=1), units.cost("cost after the iteration")),
        "history_gradient_norm": (si, np.stack(history.gradient_norm, axis=1),
                                  _one("scaled gradient max_j |J_j^T r| / (|J_j| |r|)")),
        "history_damping": (si, np.stack(history.damping, axis=1), _one(damping)),
        "history_step_norm": (si, np.stack(history.step_norm, axis=1), _one("scaled norm |D^(1/2) dz| of the step")),
        "history_accepted": (si, np.stack(history.accepted, axis=1),
                             {"long_name": "step accepted", "flag_values": np.array([-1, 0, 1], np.int8),
                              "flag_meanings": "no_step rejected accepted"}),
    }
