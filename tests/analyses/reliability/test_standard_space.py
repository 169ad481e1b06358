"""The Nataf transform: round trips into both tails, the exact Jacobian against finite differences, checks."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.reliability import nataf
from sensitivity.errors import ConfigError

MARGINALS = [stats.gumbel_r(loc=10.0, scale=2.0), stats.lognorm(0.25, scale=np.exp(1.0)), stats.uniform(1.0, 2.0),
             stats.truncnorm(-1.5, 3.5, loc=5.0, scale=2.0)]
CORRELATION = np.array([[1.0, 0.3, 0.0, -0.2], [0.3, 1.0, 0.4, 0.0], [0.0, 0.4, 1.0, 0.1], [-0.2, 0.0, 0.1, 1.0]])


def test_round_trip_keeps_its_accuracy_eight_standard_deviations_out():
    space = nataf(MARGINALS[:2])
    u = np.array([[-8.0, 8.0], [8.0, -8.0], [0.0, 0.0], [-3.0, 5.5]])
    np.testing.assert_allclose(space.to_standard(space.to_physical(u)), u, rtol=1e-9, atol=1e-9)


def test_independent_transform_is_the_marginal_quantile_of_phi():
    u = np.array([[-1.0, 0.5, 2.0, -0.3]])
    x = nataf(MARGINALS).to_physical(u)[0]
    expected = [m.ppf(stats.norm.cdf(v)) for m, v in zip(MARGINALS, u[0])]
    np.testing.assert_allclose(x, expected, rtol=1e-12)


def test_correlated_transform_gives_normal_scores_with_the_correlation():
    space = nataf(MARGINALS, CORRELATION)
    x = space.to_physical(np.random.default_rng(0).standard_normal((40_000, 4)))
    scores = np.stack([stats.norm.ppf(m.cdf(x[:, i])) for i, m in enumerate(MARGINALS)], axis=1)
    np.testing.assert_allclose(np.corrcoef(scores.T), CORRELATION, atol=0.015)
    np.testing.assert_allclose(space.to_standard(x[:5]), np.random.default_rng(0).standard_normal((5, 4)),
                               atol=1e-9)


def test_jacobian_matches_central_differences():
    space = nataf(MARGINALS, CORRELATION)
    u = np.random.default_rng(1).standard_normal((3, 4)) * 1.5
    _, jac = space.jacobian(u)
    h = 1e-6
    for i in range(4):
        step = np.zeros(4)
        step[i] = h
        numeric = (space.to_physical(u + step) - space.to_physical(u - step)) / (2 * h)
        np.testing.assert_allclose(jac[:, :, i], numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("correlation, match", [(np.eye(3), r"\[4, 4\]"), (np.full((4, 4), 1.2), "unit diagonal"),
                                                (np.ones((4, 4)), "positive definite")])
def test_bad_correlation_is_a_config_error(correlation, match):
    with pytest.raises(ConfigError, match=match):
        nataf(MARGINALS, correlation)


def test_a_marginal_must_be_a_frozen_continuous_distribution():
    with pytest.raises(ConfigError, match=r"`marginals\[1\]`"):
        nataf([stats.norm(), stats.poisson(3.0)])


def _g(x):
    return x[:, 0] ** 2 * x[:, 1] - np.sin(x[:, 2]) * x[:, 3] + x[:, 1] * x[:, 2]


def _g_derivatives(x):
    grad = np.stack([2 * x[:, 0] * x[:, 1], x[:, 0] ** 2 + x[:, 2], -np.cos(x[:, 2]) * x[:, 3] + x[:, 1],
                     -np.sin(x[:, 2])], axis=1)
    h = np.zeros((len(x), 4, 4))
    h[:, 0, 0], h[:, 2, 2] = 2 * x[:, 1], np.sin(x[:, 2]) * x[:, 3]
    h[:, 0, 1] = h[:, 1, 0] = 2 * x[:, 0]
    h[:, 2, 3] = h[:, 3, 2] = -np.cos(x[:, 2])
    h[:, 1, 2] = h[:, 2, 1] = 1.0
    return grad, h


@pytest.mark.parametrize("truncated_gamma", [False, True])
def test_hessian_pulled_back_to_u_matches_central_differences_of_g_of_x_of_u(truncated_gamma):
    """H_u = J^T H_x J + sum_i g_i x_i'' L_i L_i^T against float64 second differences of g(x(u)), with the
    repository's own truncated law (its logpdf) among gumbel, lognormal, uniform and a correlated copula."""
    from sensitivity.inputs.marginals import truncated

    last = truncated(stats.gamma(2.0, scale=1.5), (0.5, 6.0), "t") if truncated_gamma else MARGINALS[3]
    space = nataf([MARGINALS[0], MARGINALS[1], last, MARGINALS[2]], CORRELATION)
    u = np.random.default_rng(2).standard_normal((4, 4)) * 1.5
    grad, h = _g_derivatives(space.to_physical(u))
    pulled = space.pull_back_hessian(u, grad, h)
    step, eye = 1e-4, np.eye(4)
    f = lambda v: _g(space.to_physical(v))  # noqa: E731
    numeric = np.empty_like(pulled)
    for a in range(4):
        for b in range(4):
            da, db = step * eye[a], step * eye[b]
            numeric[:, a, b] = (f(u + da + db) - f(u + da - db) - f(u - da + db) + f(u - da - db)) / (4 * step**2)
    np.testing.assert_allclose(pulled, numeric, rtol=1e-5, atol=1e-5 * np.abs(numeric).max())


def test_second_derivative_of_x_is_zero_for_a_normal_and_minus_s_z_for_a_uniform():
    """x = mu + sigma z has x'' = 0; a uniform's x = a + w Phi(z) has x'' = -w z phi(z) (closed forms)."""
    space = nataf([stats.norm(3.0, 2.0), stats.uniform(1.0, 2.0)])
    u = np.array([[-2.5, -1.0], [0.3, 0.0], [4.0, 2.5]])
    second = space.second_derivatives(u)
    np.testing.assert_allclose(second[:, 0], 0.0, atol=1e-8)
    np.testing.assert_allclose(second[:, 1], -2.0 * u[:, 1] * stats.norm.pdf(u[:, 1]), rtol=1e-9, atol=1e-13)
