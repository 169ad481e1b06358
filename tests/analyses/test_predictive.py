"""The posterior predictive's standard errors against the closed forms of AR(1) draws.

Draws ``x_t = rho x_{t-1} + sqrt(1 - rho^2) e_t`` (stationary N(0, 1), independent parameters) pushed
through a linear model ``y = W x + c`` give outputs that are AR(1) with the same ``rho``. Closed forms
(Geyer 1992; Vehtari et al. 2021), ``N`` draws in all, ``s_k`` the std of output ``k``:

* mean: ``ESS = N (1 - rho) / (1 + rho)``, ``se = s_k / sqrt(ESS)``;
* std: ``d^2`` has autocorrelation ``rho^(2t)``, so ``ESS = N (1 - rho^2) / (1 + rho^2)`` and, with
  ``var(d^2) = 2 s^4``, ``se = s / sqrt(2 ESS)``;
* median: the indicator ``1{y <= median}`` has autocorrelation ``(2 / pi) arcsin(rho^t)`` (the
  orthant probability of a bivariate normal), ``se = sqrt(1/4 / ESS) s / phi(0)``.

The i.i.d. errors are smaller by ``sqrt(3)`` for the mean at ``rho = 0.5``, so a predictive that ignored the
autocorrelation fails.
"""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.errors import ConfigError

pytest.importorskip("tensorflow_probability")

from sensitivity.analyses.propagation.predictive import posterior_predictive  # noqa: E402

W = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
C = np.array([1.0, -2.0, 0.5])
RHO, CHAINS, DRAWS = 0.5, 8, 4000


def ar1(rng: np.random.Generator, n: int) -> np.ndarray:
    e = rng.standard_normal((CHAINS, DRAWS, n)) * np.sqrt(1 - RHO**2)
    x = np.empty_like(e)
    x[:, 0] = rng.standard_normal((CHAINS, n))
    for t in range(1, DRAWS):
        x[:, t] = RHO * x[:, t - 1] + e[:, t]
    return x


def test_standard_errors_of_ar1_draws_through_a_linear_model():
    x = ar1(np.random.default_rng(0), 2)
    ds = posterior_predictive(x, lambda p: p @ W.T + C, quantiles=[0.5])
    n, s = CHAINS * DRAWS, np.sqrt((W**2).sum(axis=1))
    np.testing.assert_allclose(ds["output_mean"].values, W @ x.reshape(-1, 2).mean(axis=0) + C, rtol=1e-12)
    ess_mean = n * (1 - RHO) / (1 + RHO)
    np.testing.assert_allclose(ds["output_mean_se"].values, s / np.sqrt(ess_mean), rtol=0.15)
    ess_sq = n * (1 - RHO**2) / (1 + RHO**2)
    np.testing.assert_allclose(ds["output_std_se"].values, s / np.sqrt(2 * ess_sq), rtol=0.15)
    lags = np.arange(1, 200)
    ess_ind = n / (1 + 2 * np.sum(2 / np.pi * np.arcsin(RHO**lags)))
    se_median = np.sqrt(0.25 / ess_ind) * s * np.sqrt(2 * np.pi)
    np.testing.assert_allclose(ds["output_quantile_se"].values[0], se_median, rtol=0.2)
    assert ds.attrs["n_samples"] == n
    assert ds.attrs["min_ess"] == pytest.approx(ess_mean, rel=0.15)


def test_standard_error_covers_the_realised_error():
    """Over independent runs the error of the predictive mean has the spread its standard error claims."""
    rng = np.random.default_rng(1)
    z = []
    for _ in range(20):
        ds = posterior_predictive(ar1(rng, 2)[:, :1000], lambda p: p @ W.T + C)
        z.append((ds["output_mean"].values - C) / ds["output_mean_se"].values)
    spread = np.std(np.concatenate(z))  # 60 standardised errors: ~1 (i.i.d. errors would give ~1.7)
    assert 0.7 < spread < 1.35, spread


def test_draws_must_be_chains():
    with pytest.raises(ConfigError, match="`draws` must be"):
        posterior_predictive(np.zeros((1, 10, 2)), lambda p: p)


def test_monte_carlo_of_the_draws_carries_their_autocorrelated_error():
    """``propagate=posterior``: Monte Carlo resamples the draws, so its mean cannot be known better than the
    draws' own, ``s / sqrt(ESS)`` with the AR(1) closed form ``ESS = N (1 - rho) / (1 + rho)``, however many
    resamples (2^16 here, twice the draws: their i.i.d. error alone would be ``sqrt(3) * sqrt(2)`` too small)."""
    from sensitivity.inputs.uncertainty import draws_inputs
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import Propagation, propagate

    x = ar1(np.random.default_rng(2), 2)
    ds = propagate(BatchedModel(lambda p: p @ W.T + C), draws_inputs(x.reshape(-1, 2), ["a", "b"]),
                   Propagation(methods=("monte_carlo",)), draws=x, seed=0)
    n, s = CHAINS * DRAWS, np.sqrt((W**2).sum(axis=1))
    se = ds["output_mean_se"].isel(propagation_method=0).values
    np.testing.assert_allclose(se, s / np.sqrt(n * (1 - RHO) / (1 + RHO)), rtol=0.15)
