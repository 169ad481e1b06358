"""Judge a trained surrogate: its values on held-out samples AND its derivatives against the simulator's.

A surrogate that matches values can still have wrong slopes, and every Jacobian
analysis inherits them. :func:`derivative_errors` therefore compares the
surrogate's Jacobians with float64 central finite differences of the simulator
at held-out points, in the unit-cube coordinates of the design (``dx/du`` is the
bound width, or ``x log(high/low)`` for log-scaled parameters), so the error
measure does not depend on the parameters' units.

References
----------
Czarnecki, W. M. et al. (2017), Sobolev training for neural networks, arXiv:1706.04859
(value fit does not imply derivative fit).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from sensitivity.errors import ConfigError, DataError
from sensitivity.settings import Thresholds
from sensitivity.inputs.space import ParameterSpace


@dataclass(frozen=True)
class ValueErrors:
    """Per-output value errors over a set of samples, in output units (``r2`` dimensionless); ``constant`` marks the
    outputs that take one value on every sample (an initial condition), whose ``r2`` is undefined (NaN)."""

    rmse: np.ndarray
    max_error: np.ndarray
    r2: np.ndarray
    constant: np.ndarray | None = None


def value_errors(y_true: np.ndarray, y_pred: np.ndarray) -> ValueErrors:
    """Root-mean-square error, maximum absolute error and coefficient of determination per output.

    ``r2 = 1 - sum (y - y_hat)^2 / sum (y - mean y)^2`` over the samples, NaN for a constant output: one whose
    values span no more than 4 ulps of their magnitude (the mean of equal values may differ from them by rounding,
    which would put ``r2`` near ``-1e25``). Arrays are ``[K, *out]``; results ``[*out]``.
    """
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    if y_true.shape != y_pred.shape or y_true.ndim < 2:
        raise DataError(f"`y_true` {list(y_true.shape)} and `y_pred` {list(y_pred.shape)} must have one shape [K, ...]")
    residual = y_pred - y_true
    constant = np.ptp(y_true, axis=0) <= 4 * np.finfo(float).eps * np.abs(y_true).max(axis=0)
    total = ((y_true - y_true.mean(axis=0)) ** 2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(constant, np.nan, 1.0 - (residual**2).sum(axis=0) / total)
    return ValueErrors(np.sqrt((residual**2).mean(axis=0)), np.abs(residual).max(axis=0), r2, constant)


def constant_outputs_line(values: ValueErrors, output_names: Sequence[str], shown: int = 5) -> str | None:
    """One line naming the outputs constant on the test samples (left out of the R^2 check), None when none is."""
    if values.constant is None or not values.constant.any():
        return None
    names = [output_names[i] for i in np.flatnonzero(values.constant.ravel())]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (f"constant outputs (one value on every test sample, no R^2; left out of the fit's check): "
            f"{', '.join(names[:shown])}{more}")


def unit_cube_scale(space: ParameterSpace, points: np.ndarray) -> np.ndarray:
    """``dx/du`` at ``points`` for the design's unit-cube coordinates ``u``: ``[K, n]``.

    The bound width for linear parameters and ``x log(high / low)`` for ``scale="log"`` ones,
    i.e. the derivative of :func:`sensitivity.sweep.designs.to_bounds`.
    """
    x = np.asarray(points, float)
    low, high = space.bounds.T
    is_log = np.array([p.scale == "log" for p in space.parameters])
    return np.where(is_log, x * np.log(np.where(is_log, high, 1.0) / np.where(is_log, low, 1.0)), high - low)


def central_differences(simulate: Callable[[np.ndarray], np.ndarray], points: np.ndarray,
                        steps: np.ndarray) -> np.ndarray:
    """Float64 central finite-difference Jacobians ``(f(x + h e_j) - f(x - h e_j)) / 2h``.

    Parameters
    ----------
    simulate
        Batched model ``[M, n] -> [M, *out]``; called once on all ``2 K n`` shifted points.
    points
        ``[K, n]`` points.
    steps
        ``[K, n]`` steps ``h`` in parameter units (> 0).

    Returns
    -------
    numpy.ndarray
        ``[K, *out, n]`` Jacobians; the error is ``O(h^2)`` plus the model's noise divided by ``h``.
    """
    x = np.asarray(points, float)
    h = np.broadcast_to(np.asarray(steps, float), x.shape)
    if np.any(~(h > 0)):
        raise ConfigError(f"finite-difference `steps` must be > 0, got min {h.min()}")
    k, n = x.shape
    shifts = h[:, :, None] * np.eye(n)  # [K, n, n]: row j shifts parameter j
    shifted = np.concatenate([x[:, None] + shifts, x[:, None] - shifts], axis=1).reshape(-1, n)
    f = np.asarray(simulate(shifted), float)
    out_shape = f.shape[1:]
    f = f.reshape(k, 2, n, -1)
    jac = (f[:, 0] - f[:, 1]) / (2.0 * h[:, :, None])  # [K, n, m]
    return np.moveaxis(jac, 1, -1).reshape(k, *out_shape, n)


#: A parameter whose reference derivatives (its Jacobian column over all check points, in unit-cube coordinates)
#: are below this fraction of the largest parameter's has derivatives of ~0: its relative error divides by ~0 and
#: says nothing (616 % for an inert input beside a 3.8 % median), so its error is read against the largest column.
NEGLIGIBLE_COLUMN = 0.01


@dataclass(frozen=True)
class DerivativeErrors:
    """Relative Jacobian errors in unit-cube coordinates.

    ``per_point [K]``: ``||J - J_ref||_F / ||J_ref||_F`` at each point; ``per_column [K, n]``: the same
    per parameter column; ``per_parameter [n]``: per column over all points together. ``negligible [n]``: the
    parameters whose derivatives are ~0 (:data:`NEGLIGIBLE_COLUMN`), and ``per_parameter_absolute [n]`` each
    column's error over the largest column's reference norm, what such a parameter's error is read against.
    """

    per_point: np.ndarray
    per_column: np.ndarray
    per_parameter: np.ndarray
    negligible: np.ndarray | None = None
    per_parameter_absolute: np.ndarray | None = None

    def shown_error(self, j: int) -> tuple[float, str]:
        """Parameter ``j``'s error as the report states it: relative, or absolute where its derivatives are ~0."""
        if self.negligible is not None and self.negligible[j]:
            return float(self.per_parameter_absolute[j]), "of the largest column (derivatives ~0)"
        return float(self.per_parameter[j]), ""


def derivative_errors(jacobian: np.ndarray, reference: np.ndarray, scale: np.ndarray) -> DerivativeErrors:
    """Compare Jacobians ``[K, *out, n]`` with reference ones after scaling column ``j`` by ``scale[:, j]``.

    Scaling by ``dx/du`` (see :func:`unit_cube_scale`) makes the Frobenius norm independent of the
    parameters' units.
    """
    jac, ref = np.asarray(jacobian, float), np.asarray(reference, float)
    if jac.shape != ref.shape:
        raise DataError(f"`jacobian` {list(jac.shape)} and `reference` {list(ref.shape)} must have one shape")
    k, n = jac.shape[0], jac.shape[-1]
    s = np.asarray(scale, float).reshape(k, 1, n)
    diff, ref = (jac - ref).reshape(k, -1, n) * s, ref.reshape(k, -1, n) * s
    col_diff, col_ref = (diff**2).sum(axis=1), (ref**2).sum(axis=1)  # [K, n]
    reference_norm, largest = col_ref.sum(axis=0), col_ref.sum(axis=0).max()
    with np.errstate(divide="ignore", invalid="ignore"):
        return DerivativeErrors(
            per_point=np.sqrt(col_diff.sum(axis=1) / col_ref.sum(axis=1)),
            per_column=np.sqrt(col_diff / col_ref),
            per_parameter=np.sqrt(col_diff.sum(axis=0) / reference_norm),
            negligible=np.sqrt(reference_norm) < NEGLIGIBLE_COLUMN * np.sqrt(largest),
            per_parameter_absolute=np.sqrt(col_diff.sum(axis=0) / largest),
        )


def fidelity_warnings(values: ValueErrors, derivatives: DerivativeErrors | None, names: Sequence[str],
                      thresholds: Thresholds = Thresholds()) -> list[str]:
    """One-line warnings about a poor fit; the derivative warning says so when the values look fine."""
    messages = []
    r2_min = float(np.nanmin(values.r2)) if np.isfinite(values.r2).any() else np.nan  # NaN: every output constant
    if r2_min < thresholds.r2:
        messages.append(f"values fit poorly: lowest test R^2 {r2_min:.4f} < {thresholds.r2}")
    if derivatives is not None:
        median = float(np.nanmedian(derivatives.per_point))
        if median > thresholds.jacobian:
            shown = [derivatives.shown_error(j)[0] for j in range(len(names))]
            worst = int(np.nanargmax(shown))
            error, against = derivatives.shown_error(worst)
            although = " although the values fit well" if not r2_min < thresholds.r2 else ""
            messages.append(
                f"derivatives are poor{although}: median relative Jacobian error {median:.3f} > {thresholds.jacobian} "
                f"(worst parameter {names[worst]!r}: {error:.3f}{' ' + against if against else ''}); every "
                "Jacobian-based analysis inherits this error — train on more samples, a smooth activation or a smaller "
                "learning rate"
            )
    return messages


def summary_lines(values: ValueErrors, derivatives: DerivativeErrors | None, names: Sequence[str]) -> list[str]:
    """A short human-readable validation report (one line each)."""
    lines = [f"test values: R^2 min {np.nanmin(values.r2):.5f}, median {np.nanmedian(values.r2):.5f}; "
             f"RMSE max {np.nanmax(values.rmse):.4g}; largest error {np.nanmax(values.max_error):.4g}"]
    if derivatives is not None:
        p = derivatives.per_point
        lines.append(f"test Jacobians vs finite differences of the simulator: relative error median "
                     f"{np.nanmedian(p):.4f}, 90th percentile {np.nanpercentile(p, 90):.4f}, max {np.nanmax(p):.4f}")
        shown = [derivatives.shown_error(j) for j in range(len(names))]
        lines.append("per parameter: " + ", ".join(f"{n} {e:.4f}" + (f" {against}" if against else "")
                                                   for n, (e, against) in zip(names, shown)))
    return lines
