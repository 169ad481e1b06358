"""The labeled dataset of one propagation method, and the input variables every propagation result records.

Each method returns the same variables on the flat ``output`` axis: the output mean, standard
deviation, covariance and quantiles, their Monte Carlo standard errors (NaN for the moment methods,
which do not sample), the fraction of model evaluations outside the parameter bounds, and a status
(failures are data: a non-finite mean or covariance gives status 1 and a message, not an exception).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.errors import ConfigError
from sensitivity.outputs.labels import axis_units_attrs, flat_output_labels, matrix_coords, output_coords, parameter_coords
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")
special = lazy_import("scipy.special")

DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
#: The dim the methods are stacked on (not ``method``: ``ds.sel(method=...)`` is a keyword of xarray's ``sel``).
METHOD_DIM = "propagation_method"
STATUS_OK, STATUS_NON_FINITE = 0, 1


@dataclass(frozen=True)
class OutputLabels:
    """Names and units of the flat output axis."""

    names: tuple[str, ...]
    units: tuple[str, ...] | None

    @classmethod
    def of(cls, m: int, names: Sequence[str] | None, units: Sequence[str] | None) -> "OutputLabels":
        """Labels of ``m`` outputs: ``names`` (default ``y0 ..``) and ``units`` (default none), checked."""
        return cls(*flat_output_labels(m, names, units))


def checked_quantiles(quantiles: Sequence[float]) -> np.ndarray:
    """The probabilities of the reported quantiles as an array, or a :class:`ConfigError`."""
    p = np.asarray(quantiles, dtype=float)
    if p.ndim != 1 or p.size == 0 or not ((p > 0) & (p < 1)).all():
        raise ConfigError(f"`quantiles` must be probabilities in (0, 1), got {np.asarray(quantiles).tolist()}")
    return p


def moment_result(mean: np.ndarray, cov: np.ndarray, probabilities: np.ndarray, outputs: OutputLabels,
                  outside: float) -> xr.Dataset:
    """Result of a moment method: normal-approximation quantiles ``mean + std Phi^-1(p)``, NaN standard errors."""
    return method_result(mean, cov, probabilities, outputs, outside,
                         quantile_values=mean + std_of(cov) * special.ndtri(probabilities)[:, None], se=None)


def std_of(cov: np.ndarray) -> np.ndarray:
    """Square root of the diagonal of a covariance; NaN where a variance is negative."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(np.diag(cov))


def method_result(mean: np.ndarray, cov: np.ndarray, probabilities: np.ndarray, outputs: OutputLabels,
                  outside: float, *, quantile_values: np.ndarray, se: dict[str, np.ndarray] | None) -> xr.Dataset:
    """The labeled dataset of one method, with its status.

    Parameters
    ----------
    mean, cov
        ``[m]`` output mean and ``[m, m]`` covariance [output units, their products].
    probabilities, quantile_values
        ``[p]`` probabilities and ``[p, m]`` quantiles [output units].
    outputs
        Labels of the outputs.
    outside
        Fraction of the model evaluations outside the parameter bounds [1].
    se
        Standard errors ``mean``, ``std``, ``covariance``, ``quantile``; None: NaN (no sampling).
    """
    m, p, std = len(mean), len(probabilities), std_of(cov)
    se = se or {"mean": np.full(m, np.nan), "std": np.full(m, np.nan), "covariance": np.full((m, m), np.nan),
                "quantile": np.full((p, m), np.nan)}
    finite = all(np.isfinite(a).all() for a in (mean, std, cov))
    out_units = axis_units_attrs(outputs.units, "output")
    cov_units = axis_units_attrs(outputs.units, "output", squared=True)
    vec, mat, qnt = ("output",), ("output_i", "output_j"), ("quantile", "output")
    variables = {
        "output_mean": (vec, mean, {"long_name": "output mean", **out_units}),
        "output_std": (vec, std, {"long_name": "output standard deviation", **out_units}),
        "output_covariance": (mat, cov, {"long_name": "output covariance", **cov_units}),
        "output_quantile": (qnt, quantile_values, {"long_name": "output quantile", **out_units}),
        "output_mean_se": (vec, se["mean"], {"long_name": "Monte Carlo standard error of the mean", **out_units}),
        "output_std_se": (vec, se["std"], {"long_name": "Monte Carlo standard error of the std", **out_units}),
        "output_covariance_se": (mat, se["covariance"],
                                 {"long_name": "Monte Carlo standard error of the covariance", **cov_units}),
        "output_quantile_se": (qnt, se["quantile"],
                               {"long_name": "Monte Carlo standard error of the quantile", **out_units}),
        "outside_bounds": ((), outside, {"long_name": "fraction of model evaluations outside the parameter bounds", "units": "1"}),
        "status": ((), np.int8(STATUS_OK if finite else STATUS_NON_FINITE), {
            "long_name": "method status", "units": "1", "flag_values": np.array([0, 1], np.int8),
            "flag_meanings": "ok non_finite"}),
        "status_message": ((), "ok" if finite else "non-finite mean or covariance (NaN/inf model output, or a "
                           "negative unscented variance)", {"long_name": "method status message"}),
    }
    coords = {**output_coords(outputs.names, outputs.units), **matrix_coords("output", outputs.names, outputs.units),
              "quantile": xr.Variable("quantile", probabilities, {"long_name": "probability of the quantile", "units": "1"},
                                      encoding={"_FillValue": None})}  # CF: no fill value on a coordinate
    return xr.Dataset(variables, coords=coords)


def input_variables(inputs: InputUncertainty) -> xr.Dataset:
    """The propagated input mean and covariance, labeled by parameter (propagation.nc, local_propagation.nc)."""
    coords = {**parameter_coords(inputs.names, inputs.units), **matrix_coords("parameter", inputs.names, inputs.units)}
    units = axis_units_attrs(inputs.units, "parameter")
    squared = axis_units_attrs(inputs.units, "parameter", squared=True)
    return xr.Dataset(
        {
            "input_mean": ("parameter", inputs.mean, {"long_name": "input mean", **units}),
            "input_covariance": (("parameter_i", "parameter_j"), inputs.covariance,
                                 {"long_name": "input covariance", **squared}),
        },
        coords=coords,
    )
