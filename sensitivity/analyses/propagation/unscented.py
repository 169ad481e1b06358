"""Scaled unscented transform of the input uncertainty.

``2n + 1`` sigma points ``mu``, ``mu +- sqrt(n + lambda) L_i`` (``L L^T = S``,
``lambda = alpha^2 (n + kappa) - n``) with the weights of Wan & van der Merwe (2000):
``Wm_0 = lambda / (n + lambda)``, ``Wc_0 = Wm_0 + 1 - alpha^2 + beta``, ``W_i = 1 / (2 (n + lambda))``.
Exact in the mean of a quadratic model.

References
----------
Julier, S. J. (2002), The scaled unscented transformation, Proc. American Control Conference,
doi:10.1109/ACC.2002.1025369.
Wan, E. A. & van der Merwe, R. (2000), The unscented Kalman filter for nonlinear estimation, Proc. IEEE
AS-SPCC, doi:10.1109/ASSPCC.2000.882463.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from sensitivity.analyses.propagation.dataset import DEFAULT_QUANTILES, OutputLabels, checked_quantiles, moment_result
from sensitivity.analyses.propagation.evaluation import ValuesFn, evaluate
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.analyses.propagation.settings import Unscented
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def unscented(
    inputs: InputUncertainty,
    values_fn: ValuesFn,
    *,
    alpha: float = Unscented.alpha,
    beta: float = Unscented.beta,
    kappa: float = Unscented.kappa,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Scaled unscented transform (Julier 2002; weights of Wan & van der Merwe 2000).

    See :func:`~sensitivity.analyses.propagation.first_order` for the other parameters and the result.
    Sigma points may fall outside the parameter bounds for wide inputs; ``outside_bounds`` reports
    the fraction.

    Parameters
    ----------
    values_fn
        ``points [K, n] -> values [K, m]``, batched; called once on the ``2n + 1`` sigma points.
    alpha
        Spread of the sigma points, > 0. The default 1 puts them at ``mu +- sqrt(n + kappa) L_i``;
        the often quoted 1e-3 gives weights of order 1e6 of both signs, which cancels
        catastrophically with a float32 surrogate.
    beta
        Prior knowledge of the distribution: 2 is optimal for Gaussian inputs.
    kappa
        Secondary scaling, with ``n + lambda = alpha^2 (n + kappa) > 0``.
    """
    probabilities = checked_quantiles(quantiles)
    points, w_mean, w_cov = sigma_points(inputs.mean, inputs.covariance, alpha=alpha, beta=beta, kappa=kappa)
    values = evaluate(values_fn, points)
    mean = w_mean @ values
    centred = values - mean
    cov = (centred * w_cov[:, None]).T @ centred
    outputs = OutputLabels.of(values.shape[1], output_names, output_units)
    return moment_result(mean, cov, probabilities, outputs, float(inputs.outside_bounds(points).mean()))


def sigma_points(mean: np.ndarray, covariance: np.ndarray, *, alpha: float = 1.0, beta: float = 2.0,
                 kappa: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sigma points and weights of the scaled unscented transform.

    Returns
    -------
    points : ``[2n + 1, n]``
        ``mu``, then ``mu + c L_i`` and ``mu - c L_i`` for each column ``L_i`` of the Cholesky factor,
        ``c = sqrt(n + lambda)``.
    w_mean, w_cov : ``[2n + 1]``
        Weights of the mean and of the covariance.
    """
    for name, value in (("alpha", alpha), ("beta", beta), ("kappa", kappa)):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"`{name}` must be a finite number, got {value!r}")
    if alpha <= 0:
        raise ConfigError(f"`alpha` must be > 0, got {alpha}")
    n = len(mean)
    spread = alpha**2 * (n + kappa)  # n + lambda
    if spread <= 0:
        raise ConfigError(f"`kappa` must satisfy n + kappa > 0 (n = {n}), got kappa = {kappa}")
    lam = spread - n
    offsets = math.sqrt(spread) * np.linalg.cholesky(covariance).T  # rows: scaled columns of L
    points = np.concatenate([mean[None, :], mean + offsets, mean - offsets])
    w_mean = np.full(2 * n + 1, 0.5 / spread)
    w_mean[0] = lam / spread
    w_cov = w_mean.copy()
    w_cov[0] += 1.0 - alpha**2 + beta
    return points, w_mean, w_cov
