"""SORM against the paraboloid's exact probability (a 1-D chi-square integral, independent of the contour)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from sensitivity.analyses.reliability import FormSettings, form, sorm
from sensitivity.analyses.reliability.sorm import CURVATURE_TOO_NEGATIVE, parabolic_exact, principal_curvatures


def paraboloid(beta0, k, n):
    """``g = beta0 - u_n + k/2 sum_{i<n} u_i^2``: ``Pf = int Phi(-(beta0 + k q / 2)) chi2_{n-1}(q) dq``."""
    def limit_state(u):
        grad = k * u.copy()
        grad[:, -1] = -1.0
        return beta0 - u[:, -1] + 0.5 * k * np.sum(u[:, :-1] ** 2, axis=1), grad

    def hessian(u):
        h = np.zeros((len(u), n, n))
        idx = np.arange(n - 1)
        h[:, idx, idx] = k
        return h

    exact = integrate.quad(lambda q: stats.norm.sf(beta0 + 0.5 * k * q) * stats.chi2.pdf(q, n - 1), 0, np.inf,
                           epsabs=0, epsrel=1e-12, limit=500)[0]
    return limit_state, hessian, exact


@pytest.mark.parametrize("beta0, k, n", [(2.5, 0.3, 4), (4.0, 0.2, 6), (3.0, -0.15, 3)])
def test_sorm_on_a_paraboloid(beta0, k, n):
    limit_state, hessian, exact = paraboloid(beta0, k, n)
    first = form(limit_state, np.zeros((1, n)))
    second = sorm(hessian, first)
    assert first.beta[0] == pytest.approx(beta0, rel=1e-9)
    np.testing.assert_allclose(second.curvatures[0, 0], k, rtol=1e-9)
    assert second.pf_exact[0, 0] == pytest.approx(exact, rel=1e-8)
    assert second.pf_breitung[0, 0] == pytest.approx(stats.norm.sf(beta0) * (1 + beta0 * k) ** (-(n - 1) / 2))
    assert second.pf_tvedt[0, 0] == pytest.approx(exact, rel=0.02)  # three-term: ~1 % here
    assert second.pf_hohenbichler[0, 0] == pytest.approx(exact, rel=0.11)


def test_breitung_is_asymptotically_exact():
    errors = []
    for beta0 in (2.0, 4.0, 8.0, 16.0):
        limit_state, hessian, exact = paraboloid(beta0, 0.25, 4)
        errors.append(abs(sorm(hessian, form(limit_state, np.zeros((1, 4)))).pf_breitung[0, 0] / exact - 1))
    assert all(b < a for a, b in zip(errors, errors[1:])) and errors[-1] < 0.02


def test_exact_paraboloid_is_form_when_flat_and_holds_at_very_small_probabilities():
    for beta in (-1.5, 0.0, 0.7, 5.0, 9.0):
        assert parabolic_exact(beta, np.zeros(3)) == pytest.approx(stats.norm.sf(beta), rel=1e-9)


def test_curvatures_of_a_rotated_paraboloid_are_invariant():
    rotation = np.linalg.qr(np.random.default_rng(2).standard_normal((4, 4)))[0]
    kappa = np.array([0.1, -0.2, 0.5])
    hess = np.diag(np.append(kappa, 0.0))
    grad = np.array([0.0, 0.0, 0.0, -1.0])
    got = principal_curvatures(grad @ rotation.T * 2.0, rotation @ hess @ rotation.T * 2.0)
    np.testing.assert_allclose(got, np.sort(kappa), atol=1e-12)


def test_strongly_concave_surface_is_reported_not_raised():
    limit_state, hessian, _ = paraboloid(3.0, -0.5, 3)
    # no search: the apex (0, 0, 3), a stationary point of ||u|| on the surface but not its minimum (the search
    # finds the nearer points where the surface bends towards the origin), is the point SORM is asked about
    second = sorm(hessian, form(limit_state, np.zeros((1, 3)), FormSettings(search_rounds=0)))
    assert second.status[0, 0] == CURVATURE_TOO_NEGATIVE and np.isnan(second.pf_breitung[0, 0])
