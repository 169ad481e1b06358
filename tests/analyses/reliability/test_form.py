"""FORM against exact answers: linear limit states, R - S (normal and lognormal), two symmetric design points,
outputs x thresholds in one batched run, and failures as data."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.reliability import FormSettings, form, nataf, sphere_starts, threshold_sensitivity
from sensitivity.analyses.reliability.events import ThresholdLimitState, threshold_derivative, threshold_limit_state
from sensitivity.analyses.reliability.form import (CONVERGED, LINE_SEARCH_FAILED, MAX_ITERATIONS, NOT_STARTED,
                                                   ZERO_GRADIENT)
from sensitivity.errors import ConfigError


def linear(a, b):
    a = np.asarray(a, dtype=float)
    return lambda u: (b - u @ a, np.broadcast_to(-a, u.shape).copy())


def test_linear_limit_state_gives_the_exact_beta_alpha_and_importance_factors():
    a = np.array([1.0, -2.0, 0.5, 3.0])
    result = form(linear(a, 7.0), np.zeros((1, 4)))
    beta = 7.0 / np.linalg.norm(a)
    assert result.start_status[0, 0] == CONVERGED
    assert result.beta[0] == pytest.approx(beta, rel=1e-10)
    assert result.pf[0] == pytest.approx(stats.norm.sf(beta), rel=1e-9)
    np.testing.assert_allclose(result.alpha[0, 0], a / np.linalg.norm(a), atol=1e-12)
    np.testing.assert_allclose(result.design_u[0, 0], beta * a / np.linalg.norm(a), atol=1e-9)
    assert result.importance[0, 0].sum() == pytest.approx(1.0)


def test_beta_is_negative_when_the_origin_fails():
    result = form(linear([1.0, 1.0], -2.0), np.zeros((1, 2)))
    assert result.beta[0] == pytest.approx(-2.0 / np.sqrt(2.0), rel=1e-10)
    assert result.pf[0] == pytest.approx(stats.norm.cdf(2.0 / np.sqrt(2.0)), rel=1e-10)


def test_resistance_minus_load_with_normal_inputs_is_exact():
    r, s = stats.norm(200.0, 20.0), stats.norm(120.0, 30.0)
    limit_state = nataf([r, s]).pull_back(lambda x: (x[:, 0] - x[:, 1], np.tile([1.0, -1.0], (len(x), 1))))
    result = form(limit_state, np.zeros((1, 2)))
    assert result.beta[0] == pytest.approx(80.0 / np.hypot(20.0, 30.0), rel=1e-8)


def test_resistance_minus_load_with_lognormal_inputs_matches_the_log_ratio():
    """``R - S <= 0`` is ``ln R - ln S <= 0``, linear in ``u``: ``beta = (mu_lnR - mu_lnS) / sqrt(s_R^2 + s_S^2)``."""
    mu_r, s_r, mu_s, s_s = np.log(200.0), 0.1, np.log(100.0), 0.25
    space = nataf([stats.lognorm(s_r, scale=np.exp(mu_r)), stats.lognorm(s_s, scale=np.exp(mu_s))])
    limit_state = space.pull_back(lambda x: (x[:, 0] - x[:, 1], np.tile([1.0, -1.0], (len(x), 1))))
    result = form(limit_state, np.zeros((1, 2)))
    beta = (mu_r - mu_s) / np.hypot(s_r, s_s)
    assert result.beta[0] == pytest.approx(beta, rel=1e-7)
    np.testing.assert_allclose(result.alpha[0, 0], np.array([-s_r, s_s]) / np.hypot(s_r, s_s), atol=1e-7)
    x_star = space.to_physical(result.design_u[0, :1])[0]
    assert x_star[0] == pytest.approx(x_star[1], rel=1e-7)


def symmetric(beta0):
    return lambda u: (beta0 - np.abs(u[:, 0]),
                      np.concatenate([-np.sign(u[:, :1]), np.zeros_like(u[:, 1:])], axis=1))


def test_two_symmetric_design_points_one_start_finds_one_the_search_or_several_starts_find_both():
    single = form(symmetric(3.0), np.array([[0.3, 0.1, -0.2]]), FormSettings(search_rounds=0))
    assert single.n_points[0] == 1 and single.pf[0] == pytest.approx(stats.norm.sf(3.0), rel=1e-9)
    assert not single.several_contribute[0]
    searched = form(symmetric(3.0), np.array([[0.3, 0.1, -0.2]]))  # the default search from the one start's point
    assert searched.n_points[0] == 2 and searched.pf[0] == pytest.approx(2.0 * stats.norm.sf(3.0), rel=1e-6)
    assert (searched.start_status[0, 1:] != NOT_STARTED).sum() >= 4  # its first round of search starts ran
    many = form(symmetric(3.0), sphere_starts(3, 9, seed=4))
    assert many.n_points[0] == 2
    assert sorted(many.design_u[0, :, 0]) == pytest.approx([-3.0, 3.0], rel=1e-9)
    assert many.pf[0] == pytest.approx(2.0 * stats.norm.sf(3.0), rel=1e-6)
    assert many.several_contribute[0] and "several" in many.note
    assert many.start_status[0, 0] == ZERO_GRADIENT  # the origin: sign(0) = 0, reported, not raised
    assert np.isnan(many.start_beta[0, 0])
    summed = form(symmetric(3.0), sphere_starts(3, 9, seed=4), FormSettings(union="sum"))
    assert summed.pf[0] == pytest.approx(2.0 * stats.norm.sf(3.0), rel=1e-9)


def test_series_union_of_overlapping_half_spaces_matches_the_bivariate_normal():
    rho = 0.6
    a2 = np.array([rho, np.sqrt(1 - rho**2)])

    def two(u):
        g = np.stack([3.0 - u[:, 0], 2.5 - u @ a2], axis=1).min(axis=1)
        first = (3.0 - u[:, 0]) <= (2.5 - u @ a2)
        return g, np.where(first[:, None], [-1.0, 0.0], -a2)

    result = form(two, np.array([[4.0, -1.0], [1.0, 3.0]]))
    exact = 1.0 - stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf([3.0, 2.5])
    assert result.n_points[0] == 2
    assert result.pf[0] == pytest.approx(exact, rel=1e-4)


def test_outputs_times_thresholds_in_one_run_give_a_fragility_curve_and_its_slope():
    weights = np.array([[1.0, 0.5], [0.0, 2.0]])  # y = W u, sigma_y = row norms
    model = lambda u: (u @ weights.T, np.broadcast_to(weights, (len(u), 2, 2)).copy())  # noqa: E731
    thresholds = np.array([1.0, 2.0, 3.5])
    result = form(threshold_limit_state(model, thresholds, "above"), np.zeros((1, 2)))
    sigma = np.linalg.norm(weights, axis=1)
    exact = (thresholds[None, :] / sigma[:, None]).reshape(-1)
    np.testing.assert_allclose(result.beta, exact, rtol=1e-9)
    slope = threshold_sensitivity(result, threshold_derivative(2, thresholds, "above"))
    np.testing.assert_allclose(slope[:, 0], np.repeat(1.0 / sigma, 3), rtol=1e-9)
    below = form(threshold_limit_state(model, thresholds, "below"), np.zeros((1, 2)))
    np.testing.assert_allclose(below.beta, -exact, rtol=1e-9)


def test_each_point_steps_on_its_own_event_only_with_the_design_points_of_every_event():
    """A threshold limit state hands FORM each point's own event (``ThresholdLimitState.own``): after the first
    point, no call forms the ``[K, E, n]`` gradients of every event, and the design points are those of the
    full evaluation, on a curved model (y = exp(0.3 u1) + u2^2 / 4 + u2 and 2 u1 + 0.1 u2^2, below by FORM's
    closed form where y is linear in the direction of the design point)."""
    def model(u):
        y = np.stack([np.exp(0.3 * u[:, 0]) + u[:, 1] ** 2 / 4 + u[:, 1], 2.0 * u[:, 0] + 0.1 * u[:, 1] ** 2], axis=1)
        jac = np.stack([np.stack([0.3 * np.exp(0.3 * u[:, 0]), u[:, 1] / 2 + 1.0], axis=1),
                        np.stack([np.full(len(u), 2.0), 0.2 * u[:, 1]], axis=1)], axis=1)
        return y, jac

    thresholds = [2.0, 3.0, 4.5]
    limit = threshold_limit_state(model, thresholds, "above")
    full_calls = []

    def every_event(u):
        full_calls.append(len(u))
        return limit(u)

    starts = sphere_starts(2, 5, seed=1)
    own = form(limit, starts, FormSettings(tolerance=1e-10))
    full = form(every_event, starts, FormSettings(tolerance=1e-10))
    calls, every = [], ThresholdLimitState.__call__
    with pytest.MonkeyPatch.context() as patch:  # the own-event path evaluates every event at one point only
        patch.setattr(ThresholdLimitState, "__call__", lambda self, u: calls.append(len(u)) or every(self, u))
        form(limit, starts, FormSettings(tolerance=1e-10))
    assert calls == [1] and len(full_calls) > 5
    np.testing.assert_allclose(own.design_u, full.design_u, atol=1e-12)
    np.testing.assert_array_equal(own.start_status, full.start_status)
    assert own.evaluations == full.evaluations
    np.testing.assert_allclose(own.beta[3:], np.array(thresholds) / 2.0, rtol=1e-8)  # 2 u1 = T at u2 = 0


def test_threshold_sensitivity_matches_finite_differences_on_a_nonlinear_limit_state():
    def model(u):
        y = np.exp(0.3 * u[:, 0]) + u[:, 1] ** 2 / 4 + u[:, 1]
        jac = np.stack([0.3 * np.exp(0.3 * u[:, 0]), u[:, 1] / 2 + 1.0], axis=1)
        return y[:, None], jac[:, None, :]

    t, h = 4.0, 1e-4
    betas = form(threshold_limit_state(model, [t - h, t, t + h], "above"), np.zeros((1, 2))).beta
    slope = threshold_sensitivity(form(threshold_limit_state(model, [t], "above"), np.zeros((1, 2))), np.ones(1))
    assert slope[0, 0] == pytest.approx((betas[2] - betas[0]) / (2 * h), rel=1e-5)


def test_failures_are_data_not_exceptions():
    flat = lambda u: (np.ones(len(u)), np.zeros_like(u))  # noqa: E731
    assert form(flat, np.zeros((1, 2))).start_status[0, 0] == ZERO_GRADIENT
    short = form(lambda u: (3.0 - u[:, 0] - 0.4 * u[:, 1] ** 2, np.stack([-np.ones(len(u)), -0.8 * u[:, 1]], 1)),
                 np.array([[0.0, 2.0]]), FormSettings(max_iterations=1))
    assert short.start_status[0, 0] in (MAX_ITERATIONS, LINE_SEARCH_FAILED)
    assert np.isnan(short.beta[0]) and np.isnan(short.pf[0])


@pytest.mark.parametrize("field, value", [("tolerance", 0.0), ("gamma", 1.0), ("armijo", 1.5),
                                          ("union", "parallel"), ("max_iterations", 0)])
def test_bad_settings_name_the_field(field, value):
    with pytest.raises(ConfigError, match=f"`{field}`"):
        FormSettings(**{field: value})


def test_bad_starts_and_shapes_are_config_errors():
    with pytest.raises(ConfigError, match="`starts`"):
        form(linear([1.0], 2.0), np.zeros(3))
    with pytest.raises(ConfigError, match="limit state must return"):
        form(lambda u: (np.zeros(len(u)), np.zeros((len(u), 5))), np.zeros((1, 2)))


def test_a_singular_step_is_a_failed_start_not_a_crash(monkeypatch):
    """The SEIR fault (50 thresholds x 100 days: ``LinAlgError: Singular matrix`` in the direction step, exit 1):
    a quasi-Newton estimate that went singular is reset to ``I`` (the HL-RF step) and the start goes on; a
    system that is singular all the same gives NaN for its row (status ``SINGULAR_STEP``), not an exception for
    the batch."""
    import importlib

    fm = importlib.import_module("sensitivity.analyses.reliability.form")  # the module (the package exports the verb)
    monkeypatch.setattr(fm, "_bfgs", lambda hess, *args: np.zeros_like(hess))  # every update singular
    result = form(linear([1.0, 2.0], 3.0), np.array([[0.5, -0.5], [1.0, 1.0]]), FormSettings(search_rounds=0))
    assert (result.start_status == CONVERGED).all() and result.beta[0] == pytest.approx(3.0 / np.sqrt(5.0), rel=1e-9)
    hess = np.stack([np.eye(2), np.zeros((2, 2))])
    d, mu = fm._direction(hess, np.ones((2, 2)), np.ones(2), np.ones((2, 2)))
    assert np.all(np.isfinite(d[0])) and np.all(np.isnan(d[1])) and np.isnan(mu[1])
    assert fm.STATUS_MESSAGES[fm.SINGULAR_STEP] == "the step's linear system was singular"
