"""The posterior predictive: every MCMC draw through the model, with autocorrelation-aware standard errors.

:func:`posterior_predictive` is a propagation method (the ``posterior`` entry of
:func:`~sensitivity.analyses.propagation.propagate`'s ``method`` axis): it evaluates the model at all
``C x D`` draws of ``posterior.nc`` (no resampling) and reports the output mean, standard deviation,
covariance and quantiles of the predictive. MCMC draws are autocorrelated, so their Monte Carlo
standard errors are not the i.i.d. ones: each uses the multi-chain effective sample size (Geyer's
initial positive sequence on the split chains, :func:`~sensitivity.analyses.posterior.diagnostics.effective_sample_size`, Vehtari et
al. 2021) of the quantity it averages, output by output:

* mean: ``sd(y_k) / sqrt(ESS(y_k))``;
* std (delta method on the variance): ``sd(d_k^2) / (2 std_k sqrt(ESS(d_k^2)))`` with ``d = y - mean``;
* covariance: ``sd(d_i d_j) / sqrt(min(ESS(d_i^2), ESS(d_j^2)))`` (the ESS of the products is
  approximated by the smaller of the two squared deviations');
* quantile ``q_p``: half the width of ``[q_(p - e), q_(p + e)]`` with ``e = sqrt(p (1 - p) / ESS(1{y_k <= q_p}))``,
  the binomial interval of the indicator's ESS mapped through the empirical quantile function
  (Vehtari et al. 2021, section 4.3).

Equivalently every standard error is its i.i.d. value scaled by ``sqrt(N / ESS)``. These are the error
bars of the nonlinearity verdict when ``posterior`` is its reference.

Monte Carlo of the draws' empirical distribution (``propagate=posterior``: ``monte_carlo`` resamples the
draws) inherits their error: its estimate is the draws' own plus resampling noise, independent of it, so
:func:`with_chain_error` adds the two variances, ``se^2 = se_resampling^2 + se_draws^2`` (the i.i.d. error of
``N`` resamples cannot fall below the draws' ``sd / sqrt(ESS)``, however large ``N``).

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. & Buerkner, P.-C. (2021). Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC. Bayesian Analysis
16(2), 667-718. https://doi.org/10.1214/20-BA1221
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.analyses.posterior.diagnostics import effective_sample_size
from sensitivity.analyses.propagation.dataset import (DEFAULT_QUANTILES, OutputLabels, checked_quantiles,
                                                      method_result)
from sensitivity.analyses.propagation.evaluation import ValuesFn, evaluate
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Memory for one block of quantile indicators in :func:`autocorrelated_errors` [bytes].
INDICATOR_BYTES = 16 * 2**20


def posterior_predictive(draws: np.ndarray, values_fn: ValuesFn, *, quantiles: Sequence[float] = DEFAULT_QUANTILES,
                         output_names: Sequence[str] | None = None, output_units: Sequence[str] | None = None,
                         bounds: np.ndarray | None = None, block_size: int = 4096) -> xr.Dataset:
    """Push ``draws [chain, draw, parameter]`` through ``values_fn``; moments with ESS-based standard errors.

    Parameters
    ----------
    draws
        MCMC draws (``posterior.nc``'s ``draws``), at least 2 chains of at least 4 draws, finite.
    values_fn
        Batched ``[K, n] -> [K, m]`` model.
    quantiles, output_names, output_units
        As :func:`~sensitivity.analyses.propagation.monte_carlo`.
    bounds
        ``[n, 2]`` parameter bounds, for ``outside_bounds`` (None: 0).
    block_size
        Draws per model call.

    Returns
    -------
    xarray.Dataset
        One propagation method's variables (:func:`~sensitivity.analyses.propagation.dataset.method_result`);
        attributes ``n_samples`` (draws evaluated) and ``min_ess`` (smallest ESS of an output mean).
    """
    x = np.asarray(draws, float)
    if x.ndim != 3 or x.shape[0] < 2 or x.shape[1] < 4:
        raise ConfigError(f"`draws` must be [chain >= 2, draw >= 4, parameter], got {list(x.shape)}")
    if not np.isfinite(x).all():
        raise ConfigError("`draws` must be finite")
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ConfigError(f"`block_size` must be a positive integer, got {block_size!r}")
    probabilities = checked_quantiles(quantiles)
    c, d, n = x.shape
    flat = x.reshape(-1, n)
    y = np.concatenate([evaluate(values_fn, flat[i:i + block_size]) for i in range(0, len(flat), block_size)])
    outputs = OutputLabels.of(y.shape[1], output_names, output_units)
    outside = 0.0
    if bounds is not None:
        b = np.asarray(bounds, float)
        outside = float(((flat < b[:, 0]) | (flat > b[:, 1])).any(axis=1).mean())
    mean, q = y.mean(axis=0), np.quantile(np.ascontiguousarray(y.T), probabilities, axis=1)  # contiguous partitions
    dev = y - mean
    cov = np.dot(dev.T, dev) / (len(y) - 1)
    se = autocorrelated_errors(y.reshape(c, d, -1), probabilities, q)
    result = method_result(mean, cov, probabilities, outputs, outside, quantile_values=q, se=se)
    result.attrs.update(n_samples=c * d, min_ess=float(np.min(se.pop("ess"))))
    return result


def with_chain_error(resampled: xr.Dataset, predictive: xr.Dataset) -> xr.Dataset:
    """``resampled`` (Monte Carlo of the draws' empirical distribution) with the draws' own error added:
    each ``*_se`` becomes ``sqrt(se^2 + se_predictive^2)`` (:func:`posterior_predictive` on the same draws)."""
    names = ("output_mean_se", "output_std_se", "output_covariance_se", "output_quantile_se")
    return resampled.assign({k: np.hypot(resampled[k], predictive[k].values) for k in names})


def autocorrelated_errors(y: np.ndarray, probabilities: np.ndarray, q: np.ndarray) -> dict[str, np.ndarray]:
    """Standard errors of mean, std, covariance and quantiles of ``y [chain, draw, m]`` from the ESS of
    each averaged quantity (see the module docstring); ``ess`` is the ESS of each output's values."""
    c, d, m = y.shape
    flat = y.reshape(-1, m)
    dev = flat - flat.mean(axis=0)
    sq = dev ** 2
    std = flat.std(axis=0, ddof=1)
    ess_y = np.maximum(effective_sample_size(y), 1.0)
    ess_sq = np.maximum(effective_sample_size(sq.reshape(c, d, m)), 1.0)
    cov_mean = np.dot(dev.T, dev) / len(flat)
    products = np.dot(sq.T, sq) / len(flat) - cov_mean ** 2  # var(d_i d_j) = E[d_i^2 d_j^2] - E[d_i d_j]^2
    with np.errstate(divide="ignore", invalid="ignore"):
        se_std = np.sqrt(sq.var(axis=0, ddof=1) / ess_sq) / (2 * std)
    ess_q = np.empty(q.shape)
    step = max(1, INDICATOR_BYTES // y[..., None, :1].size)  # outputs per block of indicators (1 byte each)
    for j in range(0, m, step):  # ESS of 1{y_k <= q_pk}, a block of outputs at a time
        indicators = y[..., None, j : j + step] <= q[:, j : j + step]  # [chain, draw, quantile, output]
        ess_q[:, j : j + step] = effective_sample_size(indicators.reshape(c, d, -1)).reshape(len(q), -1)
    ess_q = np.maximum(ess_q, 1.0)
    half = np.sqrt(probabilities[:, None] * (1 - probabilities[:, None]) / ess_q)
    lo = np.clip(probabilities[:, None] - half, 0.0, 1.0)
    hi = np.clip(probabilities[:, None] + half, 0.0, 1.0)
    columns = np.ascontiguousarray(flat.T)  # each output's values contiguous for its partitions
    se_q = 0.5 * np.stack([np.quantile(columns[j], hi[:, j]) - np.quantile(columns[j], lo[:, j])
                           for j in range(m)], axis=1)
    return {"mean": std / np.sqrt(ess_y), "std": se_std,
            "covariance": np.sqrt(np.maximum(products, 0.0) / np.minimum.outer(ess_sq, ess_sq)),
            "quantile": se_q, "ess": ess_y}
