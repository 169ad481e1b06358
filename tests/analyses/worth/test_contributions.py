"""Parameter contributions against the reduced problem solved by direct inversion, and the posterior's own Schur
complement."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.worth import fosm, parameter_contributions
from tests.helpers.linear_gaussian import forecast_variance, posterior, random_problem


def reduced_problem(p, known):
    """pyEMU's conditional instance written out: condition the prior, drop the columns and rows."""
    keep = np.setdiff1d(np.arange(p.prior.shape[0]), known)
    c = p.prior
    cond = (c[np.ix_(keep, keep)]
            - c[np.ix_(keep, known)] @ np.linalg.inv(c[np.ix_(known, known)]) @ c[np.ix_(known, keep)])
    post = posterior(p.jacobian[:, keep], cond, p.noise)
    y = p.forecasts[keep]
    return forecast_variance(cond, y), forecast_variance(post, y)


def test_each_parameter_known_matches_the_reduced_problem():
    p = random_problem(4)
    result = parameter_contributions(fosm(p.jacobian, p.prior, p.noise, p.forecasts))
    for i in range(5):
        prior, post = reduced_problem(p, np.array([i]))
        np.testing.assert_allclose(result.prior_variance[i], prior, rtol=1e-11)
        np.testing.assert_allclose(result.posterior_variance[i], post, rtol=1e-11)
    assert result.group_names == tuple(f"par_{i}" for i in range(5))
    assert np.all(result.contribution >= -1e-12)


def test_named_groups_match_the_conditional_posterior_covariance():
    """Knowing x_g and conditioning the full posterior on it are the same thing: P_kk - P_kg P_gg^-1 P_gk."""
    p = random_problem(5)
    names = [f"k{i}" for i in range(5)]
    problem = fosm(p.jacobian, p.prior, p.noise, p.forecasts, parameter_names=names)
    result = parameter_contributions(problem, {"first": ["k0", "k3"], "second": [1, 2, 4][:2], "one": "k4"})
    post = posterior(p.jacobian, p.prior, p.noise)
    for row, known in enumerate([np.array([0, 3]), np.array([1, 2]), np.array([4])]):
        keep = np.setdiff1d(np.arange(5), known)
        cond = post[np.ix_(keep, keep)] - post[np.ix_(keep, known)] @ np.linalg.solve(
            post[np.ix_(known, known)], post[np.ix_(known, keep)])
        np.testing.assert_allclose(result.posterior_variance[row], forecast_variance(cond, p.forecasts[keep]),
                                   rtol=1e-10)
        np.testing.assert_allclose(result.prior_variance[row], reduced_problem(p, known)[0], rtol=1e-11)
    assert result.group_names == ("first", "second", "one")
