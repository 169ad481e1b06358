"""FOSM posterior against Bayes' rule by direct inversion, and where the direct forms lose digits."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.worth import fosm
from tests.helpers.linear_gaussian import forecast_variance, posterior, random_problem


def test_posterior_covariance_and_forecast_variances_match_direct_inversion():
    p = random_problem(0)
    result = fosm(p.jacobian, p.prior, p.noise, p.forecasts)
    expected = posterior(p.jacobian, p.prior, p.noise)
    np.testing.assert_allclose(result.posterior_covariance, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(result.prior_variance, forecast_variance(p.prior, p.forecasts), rtol=1e-13)
    np.testing.assert_allclose(result.posterior_variance, forecast_variance(expected, p.forecasts), rtol=1e-12)
    np.testing.assert_allclose(result.variance_reduction,
                               1 - forecast_variance(expected, p.forecasts) / forecast_variance(p.prior, p.forecasts),
                               rtol=1e-12)
    np.testing.assert_allclose(result.log_det_posterior, np.linalg.slogdet(expected)[1], rtol=1e-12)
    np.testing.assert_allclose(result.trace_posterior, np.trace(expected), rtol=1e-12)


def test_correlated_noise_and_prior_variances_match_direct_inversion():
    p = random_problem(1)
    rng = np.random.default_rng(11)
    g = rng.normal(size=(12, 12))
    noise = g @ g.T / 12 + 0.5 * np.eye(12)
    prior_var = np.diag(p.prior)
    result = fosm(p.jacobian, prior_var, noise, p.forecasts[:, 0])
    expected = posterior(p.jacobian, np.diag(prior_var), noise)
    np.testing.assert_allclose(result.posterior_covariance, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(result.posterior_variance, forecast_variance(expected, p.forecasts[:, :1]), rtol=1e-12)
    assert not result.noise_is_diagonal and result.forecast_names == ("forecast_0",)


def test_without_observations_the_posterior_is_the_prior():
    p = random_problem(2)
    result = fosm(np.zeros((0, 5)), p.prior, np.zeros(0), p.forecasts)
    np.testing.assert_allclose(result.posterior_covariance, p.prior, rtol=1e-13)
    np.testing.assert_allclose(result.posterior_variance, result.prior_variance, rtol=1e-13)


def test_data_far_more_informative_than_the_prior_keep_their_digits():
    """Prior variances 1e8, noise 1e-8: the posterior variances are ~1e-8, known exactly in a rotated basis.

    The Schur form ``C_p - C_p J^T (J C_p J^T + C_e)^-1 J C_p`` subtracts two numbers ~1e8 to get ~1e-8 and keeps no
    digit at all; the whitened QR form keeps them (checked: the Schur form is off by orders of magnitude here).
    """
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    prior_var, gains, noise = np.array([1e8, 3e7, 2e8, 5e7]), np.array([1.0, 2.0, 0.5, 3.0]), 1e-8
    prior = q @ np.diag(prior_var) @ q.T
    jacobian = np.diag(gains) @ q.T                      # observes the rotated coordinates one by one
    exact = q @ np.diag(1.0 / (1.0 / prior_var + gains**2 / noise)) @ q.T
    y = q[:, :2] + 0.1 * q[:, 2:]
    result = fosm(jacobian, prior, np.full(4, noise), y)
    np.testing.assert_allclose(result.posterior_variance, forecast_variance(exact, y), rtol=1e-8)
    schur = prior - prior @ jacobian.T @ np.linalg.solve(jacobian @ prior @ jacobian.T + noise * np.eye(4),
                                                         jacobian @ prior)
    assert np.max(np.abs(forecast_variance(schur, y) / forecast_variance(exact, y) - 1)) > 1e-2
