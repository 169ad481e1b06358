"""The step map on a 2-D slice: cost, Gauss-Newton steps and the basin of the best minimum.

A step map over a stored sweep (:mod:`.step_map`) projects steps taken in all ``n``
dimensions onto two, which reads as noise when ``n > 2``. On a slice the picture is
exact: a factorial grid over two parameters ``(a, b)`` around a point ``x*`` (the best
estimate), the other parameters held at ``x*``, where

* the cost ``|r|^2 / 2`` and the Gauss-Newton and damped steps of the two-parameter
  problem (the Jacobian columns of ``a`` and ``b`` only) come from
  :func:`~sensitivity.analyses.calibration.step_map.gauss_newton_map` at every grid
  point, one batched model call for the whole grid;
* the basin of the best minimum is the set of grid points from which the batched
  two-parameter fit (:func:`~sensitivity.analyses.calibration.calibrate`, every grid
  point a start) converges to the minimum the same fit reaches from ``x*`` itself,
  within ``basin_rtol`` of the slice's width.

For a model linear in ``(a, b)`` every Gauss-Newton step lands on the minimum and the
basin is the whole slice (tested). The two parameters default to the two least
identifiable at the estimate (Doherty & Hunt, 2009), ties broken by their weight in the
flattest direction of the cost, where the steps are least certain.

References
----------
Doherty, J. & Hunt, R. J. (2009). Two statistics for evaluating parameter
identifiability and error reduction. J. Hydrol. 366, 119-127.
https://doi.org/10.1016/j.jhydrol.2008.12.018
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sensitivity.analyses.calibration.driver import Fit, calibrate
from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.callables import BatchedModel, ValueAndJacobianFn, ValuesFn
from sensitivity.analyses.calibration.solvers import FAILED, Solver, TrustRegion
from sensitivity.analyses.calibration.step_map import GaussNewtonMap, gauss_newton_map
from sensitivity.errors import ConfigError
from sensitivity.outputs.labels import cost_units, parameter_coords, units_attrs
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


@dataclass(frozen=True)
class StepSlice:
    """The step map on a ``points_a x points_b`` grid over parameters ``pair`` through ``center``.

    Attributes
    ----------
    pair
        Indices ``(a, b)`` of the two slice parameters.
    grid_a, grid_b
        ``[points]`` values of ``a`` and ``b`` on the grid, parameter units.
    center
        ``[n]`` the point the slice goes through; the other parameters are held there.
    steps
        Gauss-Newton quantities of the two-parameter problem at the ``points_a * points_b``
        grid points (``a`` slowest), steps ``[N, 2]``.
    fit
        ``[N, 2]`` estimate of the two-parameter fit started at each grid point.
    fit_status
        ``[N]`` its :class:`~sensitivity.analyses.calibration.Status`.
    best
        ``[2]`` the minimum the fit reaches from ``center``.
    in_basin
        ``[N]`` bool: the fit from the grid point converged to ``best``.
    """

    pair: tuple[int, int]
    grid_a: np.ndarray
    grid_b: np.ndarray
    center: np.ndarray
    steps: GaussNewtonMap
    fit: np.ndarray
    fit_status: np.ndarray
    best: np.ndarray
    in_basin: np.ndarray

    def to_dataset(self, parameter_names: Sequence[str], parameter_units: Sequence[str] | None = None,
                   output_units: str | Sequence[str] | None = None) -> xr.Dataset:
        """The slice on dims ``(slice_a, slice_b)``, whose coordinates are the values of the two parameters.

        One variable per quantity and parameter (``gn_step_a``, ``gn_step_b``, ...), each in that
        parameter's units, so that every variable has a single CF unit. ``output_units`` give the
        cost's units with unknown noise (:func:`sensitivity.outputs.labels.cost_units`).
        """
        names = list(parameter_names)
        units = list(parameter_units) if parameter_units is not None else [None] * len(names)
        if len(names) != self.center.size or len(units) != len(names):
            raise ConfigError(f"`parameter_names`/`parameter_units` must have {self.center.size} entries, "
                              f"got {len(names)}")
        shape = (self.grid_a.size, self.grid_b.size)
        dims = ("slice_a", "slice_b")
        cost_attrs = cost_units(output_units, whitened=self.steps.known_noise)
        data = {
            "cost": (self.steps.cost, {"long_name": "half the squared norm of the whitened residuals", **cost_attrs}),
            "predicted_decrease": (self.steps.predicted_decrease,
                                   {"long_name": "cost decrease predicted along the Gauss-Newton step", **cost_attrs}),
            "condition_number": (self.steps.condition_number,
                                 {"long_name": "condition number of the equilibrated two-column weighted Jacobian",
                                  "units": "1"}),
            "fit_status": (self.fit_status.astype(np.int16),
                           {"long_name": "status of the two-parameter fit started at the grid point", "units": "1"}),
            "in_basin": (self.in_basin.astype(np.int8),
                         {"long_name": "the fit started at the grid point converges to the best minimum",
                          "flag_values": np.array([0, 1], np.int8), "flag_meanings": "outside inside"}),
        }
        for side, j in (("a", 0), ("b", 1)):
            name, unit = names[self.pair[j]], units_attrs(units[self.pair[j]])
            data[f"gn_step_{side}"] = (self.steps.step[:, j], {"long_name": f"Gauss-Newton step in {name}", **unit})
            data[f"damped_step_{side}"] = (self.steps.damped_step[:, j],
                                           {"long_name": f"damped (Levenberg-Marquardt) step in {name}", **unit})
            data[f"fit_{side}"] = (self.fit[:, j], {"long_name": f"{name} reached by the fit from the grid point",
                                                    **unit})
        variables = {key: xr.Variable(dims, np.asarray(value).reshape(shape), attrs)
                     for key, (value, attrs) in data.items()}
        variables["center"] = xr.Variable(("parameter",), self.center,
                                          {"long_name": "point the slice goes through (other parameters held here)"})
        for side, j in (("a", 0), ("b", 1)):
            variables[f"best_{side}"] = xr.Variable((), self.best[j], {
                "long_name": f"{names[self.pair[j]]} at the best minimum on the slice", **units_attrs(units[self.pair[j]])})
        coords = {  # CF: no fill value on a coordinate variable
            f"slice_{side}": xr.Variable(f"slice_{side}", grid, {"long_name": names[self.pair[j]],
                                                                 **units_attrs(units[self.pair[j]])},
                                         encoding={"_FillValue": None})
            for side, j, grid in (("a", 0, self.grid_a), ("b", 1, self.grid_b))}
        coords.update(parameter_coords(names, None if parameter_units is None else units))
        attrs = {"slice_parameters": f"{names[self.pair[0]]} {names[self.pair[1]]}",
                 "basin_share": f"{float(self.in_basin.mean()):.6g}"}
        return xr.Dataset(variables, coords=coords, attrs=attrs)


def least_identifiable(identifiability: np.ndarray, singular_values: np.ndarray | None = None,
                       singular_vectors: np.ndarray | None = None) -> tuple[int, int]:
    """Indices of the two least identifiable parameters.

    Lowest identifiability first (undefined counts as 0); ties, such as the 1.0 of every parameter of a
    full-rank fit, are broken by the largest weight in the flattest direction of the cost: the right
    singular vector (a row of ``singular_vectors [component, parameter]``) of the smallest positive
    value of ``singular_values [component]`` of the equilibrated Jacobian.
    """
    ident = np.asarray(identifiability, dtype=float)
    if ident.ndim != 1 or ident.size < 2:
        raise ConfigError(f"a slice needs at least two parameters, got identifiability of shape {list(ident.shape)}")
    weight = np.zeros(ident.size)
    if singular_values is not None and singular_vectors is not None:
        s = np.asarray(singular_values, dtype=float)
        positive = np.isfinite(s) & (s > 0)
        if positive.any():
            weakest = int(np.argmin(np.where(positive, s, np.inf)))
            weight = np.nan_to_num(np.abs(np.asarray(singular_vectors, dtype=float)[weakest]))
    order = np.lexsort((-weight, np.round(np.where(np.isfinite(ident), ident, 0.0), 6)))
    return int(order[0]), int(order[1])


def slice_box(center: np.ndarray, bounds: np.ndarray, pair: tuple[int, int], width: float) -> np.ndarray:
    """``[2, 2]`` (low, high) of the two slice parameters: ``center +- width * (high - low)`` of their
    bounds, clipped to the bounds."""
    if not isinstance(width, (int, float)) or not 0 < width < np.inf:
        raise ConfigError(f"`width` must be > 0, got {width!r}")
    b = np.asarray(bounds, dtype=float)[list(pair)]
    if not np.all(np.isfinite(b)):
        raise ConfigError(f"a slice box needs finite bounds for its parameters, got {b.tolist()}")
    half = width * (b[:, 1] - b[:, 0])
    c = np.asarray(center, dtype=float)[list(pair)]
    return np.stack([np.maximum(b[:, 0], c - half), np.minimum(b[:, 1], c + half)], axis=1)


def step_slice(
    value_and_jacobian: ValueAndJacobianFn,
    y_obs: np.ndarray,
    center: np.ndarray,
    pair: tuple[int, int],
    box: np.ndarray,
    *,
    points: int = 21,
    sigma: np.ndarray | float | None = None,
    cov: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    log_parameters: np.ndarray | None = None,
    damping: float = 1e-3,
    rcond: float = 1e-8,
    basin_rtol: float = 1e-3,
    solver: Solver = TrustRegion(),
    values: ValuesFn | None = None,
) -> StepSlice:
    """Cost, steps and basin of the best minimum on a factorial grid over two parameters through ``center``.

    Parameters
    ----------
    value_and_jacobian, values
        The batched model, as for :func:`~sensitivity.analyses.calibration.calibrate` (``values`` optional).
    y_obs, sigma, cov, mask
        Observations and their errors, as for :func:`~sensitivity.analyses.calibration.calibrate`.
    center
        ``[n]`` the point the slice goes through (the best estimate), parameter units.
    pair
        Indices ``(a, b)`` of the two slice parameters (e.g. :func:`least_identifiable`).
    box
        ``[2, 2]`` (low, high) of ``a`` and ``b`` (e.g. :func:`slice_box`); also the bounds of the fits.
    points
        Grid points per parameter (``points^2`` model evaluations, and as many fits).
    log_parameters
        ``[n]`` bool: fit these in log space (only ``a`` and ``b`` are fitted).
    damping
        ``lam`` of the damped step, relative to Marquardt's scaling.
    rcond
        Relative singular-value cutoff of the Gauss-Newton pseudo-inverse.
    basin_rtol
        A fit is in the basin when it stops within ``basin_rtol`` times the box's width of the best
        minimum in both parameters.
    solver
        Settings of the fits from the grid points.
    """
    center = np.asarray(center, dtype=float)
    n = center.size
    a, b = pair
    if not (0 <= a < n and 0 <= b < n and a != b):
        raise ConfigError(f"`pair` must be two different parameter indices below {n}, got {pair}")
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
        raise ConfigError(f"`points` must be an integer >= 2, got {points!r}")
    box = np.asarray(box, dtype=float)
    if box.shape != (2, 2) or not np.all(np.isfinite(box)) or not np.all(box[:, 0] < box[:, 1]):
        raise ConfigError(f"`box` must be finite [[low, high], [low, high]] with low < high, got {box.tolist()}")
    grid_a, grid_b = np.linspace(*box[0], points), np.linspace(*box[1], points)
    mesh = np.stack(np.meshgrid(grid_a, grid_b, indexing="ij"), axis=-1).reshape(-1, 2)
    columns = [a, b]

    def embed(p2: np.ndarray) -> np.ndarray:
        x = np.repeat(center[None, :], len(p2), axis=0)
        x[:, columns] = p2
        return x

    def sub_model(p2: np.ndarray):
        f, jac = value_and_jacobian(embed(p2))
        return f, np.asarray(jac)[:, :, columns]

    f, jac = sub_model(mesh)
    steps = gauss_newton_map(f, jac, y_obs, sigma=sigma, cov=cov, mask=mask, damping=damping, rcond=rcond)
    log_mask = None if log_parameters is None else np.asarray(log_parameters, dtype=bool)[columns]
    starts = np.vstack([center[None, columns], mesh])
    sub = BatchedModel(values=None if values is None else (lambda p2: values(embed(p2))), value_and_jacobian=sub_model)
    fits = calibrate(sub, ObservationModel.from_arrays(y_obs, sigma=sigma, cov=cov, mask=mask),
                     Fit(solver=solver, rcond=rcond, record_history=False, throw=False), starts=starts, bounds=box,
                     log_parameters=log_mask)
    estimate, status = fits["estimate"].values, fits["status"].values
    best = estimate[0]
    close = np.abs(estimate[1:] - best) <= basin_rtol * (box[:, 1] - box[:, 0])
    return StepSlice(pair=(a, b), grid_a=grid_a, grid_b=grid_b, center=center, steps=steps, fit=estimate[1:],
                     fit_status=status[1:], best=best, in_basin=~np.isin(status[1:], FAILED) & close.all(axis=1))
