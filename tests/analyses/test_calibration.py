"""Calibration against independent references: scipy, closed forms, the likelihood itself."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from sensitivity.analyses.calibration import (
    BatchedModel,
    CalibrationError,
    Fit,
    GaussNewton,
    LevenbergMarquardt,
    ObservationModel,
    Status,
    calibrate,
)
from sensitivity.errors import ConfigError, DataError, ModelError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputSpec

T = np.linspace(0.0, 3.0, 12)


def two_exponentials(t):
    """y = a exp(-b t) + c exp(-d t), batched, with its exact Jacobian."""
    def f(p):
        a, b, c, d = (p[:, i:i + 1] for i in range(4))
        e1, e2 = np.exp(-b * t), np.exp(-d * t)
        return a * e1 + c * e2, np.stack([e1, -a * t * e1, e2, -c * t * e2], axis=-1)
    return f


def single(f):
    """The same model for one point, for scipy."""
    return lambda p: f(p[None])[0][0], lambda p: f(p[None])[1][0]


def linear(a):
    """F(x) = A x, batched."""
    return lambda x: (x @ a.T, np.broadcast_to(a, (x.shape[0],) + a.shape).copy())


def assert_within_se(ds, reference, fraction=1e-5):
    """Estimates agree to a small fraction of their standard error: the statistically meaningful
    scale of a fit (default tolerances stop at ~1e-12 relative cost, i.e. ~1e-6 standard errors)."""
    est, se = ds["estimate"].values, ds["standard_error"].values
    assert np.all(np.abs(est - reference) <= fraction * se), (est - reference) / se


def problem(seed):
    rng = np.random.default_rng(seed)
    truth = np.array([rng.uniform(1, 3), rng.uniform(0.2, 0.6), rng.uniform(0.5, 1.5), rng.uniform(2.0, 4.0)])
    sigma = rng.uniform(0.01, 0.05, T.size)
    model = two_exponentials(T)
    y = model(truth[None])[0][0] + sigma * rng.standard_normal(T.size)
    return model, y, sigma, truth


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_scipy_least_squares_and_curve_fit(seed, weighted):
    model, y, sigma, truth = problem(seed)
    start = truth * 1.3
    w = 1 / sigma if weighted else np.ones_like(sigma)
    fun, jac = single(model)
    ref = optimize.least_squares(lambda p: w * (fun(p) - y), start, jac=lambda p: w[:, None] * jac(p),
                                 method="lm", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma if weighted else
                   None), starts=start[None])
    assert ds["status"].values[0] > 0
    assert_within_se(ds, ref.x)
    # curve_fit's covariance: absolute for known sigma, scaled by s^2 otherwise
    _, pcov = optimize.curve_fit(lambda t, *p: fun(np.array(p)), T, y, p0=ref.x, jac=lambda t, *p: jac(np.array(p)),
                                 sigma=sigma if weighted else None, absolute_sigma=weighted)
    np.testing.assert_allclose(ds["covariance"].values[0], pcov, rtol=1e-5)
    np.testing.assert_allclose(ds["chi2"].values[0], np.sum(ref.fun**2), rtol=1e-10)


def test_full_covariance_is_whitened_by_its_cholesky_factor():
    model, y, sigma, truth = problem(3)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((T.size, T.size)) * 0.01
    cov = a @ a.T + np.diag(sigma**2)
    chol = np.linalg.cholesky(cov)
    fun, jac = single(model)
    ref = optimize.least_squares(lambda p: np.linalg.solve(chol, fun(p) - y), truth,
                                 jac=lambda p: np.linalg.solve(chol, jac(p)), method="lm", xtol=1e-15, ftol=1e-15)
    ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, cov=cov), starts=truth[None])
    assert_within_se(ds, ref.x)
    j = np.linalg.solve(chol, jac(ref.x))
    np.testing.assert_allclose(ds["covariance"].values[0], np.linalg.inv(j.T @ j), rtol=1e-6)
    np.testing.assert_allclose(ds["observation_std"].values, np.sqrt(np.diag(cov)), rtol=1e-12)


def test_diagonal_covariance_equals_sigma_and_missing_values_drop_out():
    model, y, sigma, truth = problem(4)
    y_missing = y.copy()
    y_missing[[2, 7]] = np.nan
    mask = np.ones(T.size, bool)
    mask[5] = False
    by_sigma = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y_missing, sigma=sigma,
                         mask=mask), starts=truth[None])
    by_cov = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y_missing,
                       cov=np.diag(sigma**2), mask=mask), starts=truth[None])
    keep = np.setdiff1d(np.arange(T.size), [2, 5, 7])
    fun, jac = single(model)
    ref = optimize.least_squares(lambda p: (fun(p) - y)[keep] / sigma[keep], truth, method="lm",
                                 jac=lambda p: jac(p)[keep] / sigma[keep, None], xtol=1e-15, ftol=1e-15)
    for ds in (by_sigma, by_cov):
        assert_within_se(ds, ref.x)
        assert ds["observed"].values.sum() == keep.size
        assert np.isnan(ds["residual"].values[0, [2, 5, 7]][[0, 2]]).all()  # missing y -> no residual
    # Each fit stops within ~1e-6 standard errors of the minimum (assert_within_se), and the two whitenings
    # (1/sigma and the Cholesky factor of diag(sigma^2)) round differently, so the iterations may stop at points that
    # differ by that much: the covariances at them agree to ~1e-7 relative (measured 2.5e-7 on one machine).
    np.testing.assert_allclose(by_sigma["covariance"].values, by_cov["covariance"].values, rtol=1e-5)


def test_linear_gaussian_prior_gives_the_exact_posterior():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 3))
    sigma = rng.uniform(0.5, 1.0, 6)
    y = rng.standard_normal(6)
    mu = np.array([0.3, -0.2, 1.0])
    b = rng.standard_normal((3, 3))
    prior_cov = b @ b.T + 0.5 * np.eye(3)
    w = np.diag(1 / sigma**2)
    post_cov = np.linalg.inv(a.T @ w @ a + np.linalg.inv(prior_cov))
    post_mean = post_cov @ (a.T @ w @ y + np.linalg.solve(prior_cov, mu))
    ds = calibrate(BatchedModel(value_and_jacobian=linear(a)), ObservationModel.from_arrays(y, sigma=sigma),
                   starts=rng.standard_normal((3, 3)), prior_mean=mu, prior_cov=prior_cov)
    np.testing.assert_allclose(ds["covariance"].values[0], post_cov, rtol=1e-10)
    assert_within_se(ds, post_mean, fraction=1e-6)
    # the delta-method band of a linear model is exact: sd = sqrt(diag(A C A^T))
    np.testing.assert_allclose(ds["prediction_std"].values[0], np.sqrt(np.diag(a @ post_cov @ a.T)), rtol=1e-10)
    np.testing.assert_allclose(ds["prior_std"].values, np.sqrt(np.diag(prior_cov)), rtol=1e-12)


def test_prior_makes_an_underdetermined_problem_solvable():
    a = np.array([[1.0, 1.0]])  # one observation, two parameters
    ds = calibrate(BatchedModel(value_and_jacobian=linear(a)), ObservationModel.from_arrays(np.array([2.0]),
                   sigma=0.1), starts=np.zeros((1, 2)), prior_mean=np.zeros(2), prior_cov=np.eye(2))
    assert ds["status"].values[0] > 0
    assert np.isfinite(ds["covariance"].values).all()
    assert int(ds["rank"].values[0]) == 1  # the data alone determine only the sum
    np.testing.assert_allclose(ds["identifiability"].values[0], [0.5, 0.5], atol=1e-12)
    assert ds["standard_error_status"].values[0] == 0 and ds["unidentified"].values[0] == ""
    assert ds.attrs["underdetermined"] == "no"


def test_more_parameters_than_observations_is_flagged_with_the_missing_direction():
    a = np.array([[1.0, 2.0]])  # one observation, two parameters: only x1 + 2 x2 is determined
    ds = calibrate(BatchedModel(value_and_jacobian=linear(a)), ObservationModel.from_arrays(np.array([2.0]),
                   sigma=0.1), starts=np.zeros((1, 2)))
    assert np.isnan(ds["standard_error"].values).all()
    assert ds["standard_error_status"].values[0] == 1 and ds.attrs["underdetermined"].startswith("1 of 1 starts")
    assert ds["unidentified"].values[0] == "d(p0, p1) ~ (+1, -0.5)"  # a step (2, -1) leaves A x unchanged


def test_unknown_noise_without_degrees_of_freedom_is_flagged():
    a = np.array([[1.0, 0.0], [0.0, 1.0]])  # two observations, two parameters, noise unknown: s^2 = 0 / 0
    ds = calibrate(BatchedModel(value_and_jacobian=linear(a)), ObservationModel.from_arrays(np.array([1.0, 2.0])),
                   starts=np.zeros((1, 2)))
    assert np.isnan(ds["standard_error"].values).all()
    assert ds["standard_error_status"].values[0] == 2 and ds["unidentified"].values[0] == ""


def test_bounds_are_respected_and_match_scipy():
    model, y, sigma, truth = problem(6)
    bounds = np.array([[0.0, 10.0], [0.0, truth[1] * 0.8], [0.0, 10.0], [0.0, 10.0]])  # truth[1] is outside
    start = np.array([[1.0, truth[1] * 0.5, 1.0, 3.0], [2.5, 0.1, 0.7, 2.5]])
    fun, jac = single(model)
    ref = optimize.least_squares(lambda p: (fun(p) - y) / sigma, start[0], jac=lambda p: jac(p) / sigma[:, None],
                                 bounds=bounds.T, method="trf", xtol=1e-15, ftol=1e-15, gtol=1e-15)
    ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma), starts=start,
                   bounds=bounds)
    assert (ds["status"].values > 0).all()
    np.testing.assert_allclose(ds["estimate"].values, np.broadcast_to(ref.x, (2, 4)), rtol=1e-7)
    assert ds["estimate"].values[0, 1] == bounds[1, 1]  # held on the active bound
    np.testing.assert_array_equal(ds["at_bound"].values, np.broadcast_to(ref.active_mask, (2, 4)))  # scipy's flags
    assert ref.active_mask.tolist() == [0, 1, 0, 0]
    history = ds["history_parameter"].values
    ok = np.isfinite(history[..., 0])
    assert (history[ok] >= bounds[:, 0]).all() and (history[ok] <= bounds[:, 1]).all()


def test_log_parameters_keep_positivity_and_give_the_same_fit():
    model, y, sigma, truth = problem(7)
    start = truth[None] * np.array([0.3, 3.0, 3.0, 3.0])  # far, but keeps b < d (no label switch)
    lin = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                    starts=truth[None] * 1.1)
    log = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma), starts=start,
                    log_parameters=np.ones(4, bool))
    assert log["status"].values[0] > 0
    assert (log["history_parameter"].values[np.isfinite(log["history_parameter"].values)] > 0).all()
    assert_within_se(log, lin["estimate"].values)
    # J_z = J_x diag(x): the physical covariance does not depend on the parametrisation
    np.testing.assert_allclose(log["covariance"].values, lin["covariance"].values, rtol=1e-6)
    est, (low, high) = log["estimate"].values[0], np.moveaxis(log["parameter_interval"].values[0], -1, 0)
    np.testing.assert_allclose(low * high, est**2, rtol=1e-12)  # symmetric in log x


def test_unidentifiable_product_is_reported_not_crashed():
    """y = a b t: only the product is determined."""
    t = np.linspace(0.1, 1.0, 8)

    def model(p):
        a, b = p[:, :1], p[:, 1:]
        return a * b * t, np.stack([b * t, a * t], axis=-1)

    y = 2.0 * t + np.array([0.01, -0.02, 0.0, 0.015, -0.01, 0.005, 0.0, -0.004])
    ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=0.01),
                   starts=np.array([[1.0, 1.0], [4.0, 0.25], [0.3, 3.0]]))
    assert (ds["status"].values == Status.SINGULAR).all()
    assert (ds["rank"].values == 1).all()
    np.testing.assert_allclose(ds["identifiability"].values, 0.5, atol=1e-6)
    assert np.isnan(ds["covariance"].values).all() and np.isnan(ds["standard_error"].values).all()
    np.testing.assert_allclose(ds["estimate"].values.prod(axis=1), np.sum(t * y) / np.sum(t * t), rtol=1e-8)
    # outputs stay identifiable: the band equals that of the identifiable model y = c t
    se_c = 0.01 / np.sqrt(np.sum(t * t))
    np.testing.assert_allclose(ds["prediction_std"].values, np.broadcast_to(se_c * t, (3, t.size)), rtol=1e-6)
    assert ds["condition_number"].values.min() > 1e8
    # ... and said: every start flagged, the direction J_w does not see is d(a, b) ~ (a, -b) at the estimate
    assert (ds["standard_error_status"].values == 1).all() and ds.attrs["underdetermined"].startswith("3 of 3 starts")
    for (a, b), text in zip(ds["estimate"].values, ds["unidentified"].values):
        direction = np.array([a, -b]) / (a if abs(a) >= abs(b) else -b)  # largest component +1
        name, values = text.split(" ~ ")
        assert name == "d(p0, p1)"
        np.testing.assert_allclose([float(v) for v in values.strip("()").split(",")], direction, rtol=1e-3)


def test_batched_starts_equal_single_starts_and_share_model_calls():
    model, y, sigma, truth = problem(8)
    rng = np.random.default_rng(8)
    starts = truth * rng.uniform(0.6, 1.6, (6, 4))
    calls = []

    def counted(p):
        calls.append(p.shape[0])
        return model(p)

    together = calibrate(BatchedModel(value_and_jacobian=counted), ObservationModel.from_arrays(y, sigma=sigma),
                         Fit(throw=False), starts=starts)
    n_iter = together["n_iterations"].values
    # one call per iteration with every active start in it, then one at all the estimates
    assert calls == [int(np.sum(n_iter >= i)) for i in range(n_iter.max() + 1)] + [len(starts)]
    for k in range(len(starts)):
        alone = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                          Fit(throw=False), starts=starts[k:k + 1])
        assert alone["status"].values[0] == together["status"].values[k]
        np.testing.assert_allclose(alone["estimate"].values[0], together["estimate"].values[k], rtol=1e-9)
        np.testing.assert_allclose(alone["covariance"].values[0], together["covariance"].values[k], rtol=1e-7)


def test_values_only_trials_take_jacobians_only_where_a_step_was_accepted():
    model, y, sigma, truth = problem(8)
    starts = truth * np.random.default_rng(8).uniform(0.6, 1.6, (6, 4))
    value_rows, jacobian_rows = [], []

    def values(p):
        value_rows.append(p.shape[0])
        return model(p)[0]

    def counted(p):
        jacobian_rows.append(p.shape[0])
        return model(p)

    reference = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                          Fit(throw=False, record_history=True), starts=starts)
    split = calibrate(BatchedModel(value_and_jacobian=counted, values=values), ObservationModel.from_arrays(y,
                      sigma=sigma), Fit(throw=False, record_history=True), starts=starts)
    np.testing.assert_array_equal(split["estimate"].values, reference["estimate"].values)
    np.testing.assert_array_equal(split["n_iterations"].values, reference["n_iterations"].values)
    accepted = int((split["history_accepted"].values == 1).sum())
    assert sum(value_rows) == len(starts) + int(split["n_iterations"].values.sum())  # the starts, then every trial
    assert sum(jacobian_rows) == len(starts) + accepted + len(starts)  # the starts, accepted steps, the estimates


def test_float32_step_jacobian_moves_estimates_by_a_tiny_fraction_of_their_error():
    """Steps built from a Jacobian rounded to float32 reach the float64 optimum within ~1e-6 standard
    errors, and the statistics, computed from the float64 Jacobian at the estimates, are unchanged."""
    model, y, sigma, truth = problem(3)
    starts = truth * np.random.default_rng(3).uniform(0.6, 1.6, (8, 4))
    exact = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                      Fit(throw=False), starts=starts)

    def rounded(p):
        values, jac = model(p)
        return values, jac.astype(np.float32)

    fast = calibrate(BatchedModel(value_and_jacobian=model, values=lambda p: model(p)[0], step_jacobian=rounded),
                     ObservationModel.from_arrays(y, sigma=sigma), Fit(throw=False), starts=starts)
    ok = exact["status"].values > 0
    assert (fast["status"].values[ok] > 0).all()
    assert_within_se(fast.isel(start=np.flatnonzero(ok)), exact["estimate"].values[ok], fraction=1e-4)
    np.testing.assert_allclose(fast["covariance"].values[ok], exact["covariance"].values[ok], rtol=1e-6)
    with pytest.raises(ConfigError, match="`step_jacobian` needs `values`"):
        calibrate(BatchedModel(value_and_jacobian=model, step_jacobian=rounded), ObservationModel.from_arrays(y,
                  sigma=sigma), starts=starts)


def test_gauss_newton_agrees_with_levenberg_marquardt():
    model, y, sigma, truth = problem(9)
    lm = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                   starts=truth[None] * 1.2)
    for line_search in (True, False):
        gn = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                       Fit(solver=GaussNewton(line_search=line_search)), starts=truth[None] * 1.2)
        assert_within_se(gn, lm["estimate"].values)


def test_distinct_minima_and_best_start():
    """y = b^2 t has the mirror minima +-b; a far start that stops early is a failure."""
    t = np.linspace(0.0, 1.0, 5)

    def model(p):
        return p**2 * t, (2 * p * t)[..., None]

    y = 4.0 * t + np.array([0.0, 0.01, -0.01, 0.02, 0.0])
    ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=0.01),
                   starts=np.array([[1.0], [-1.5], [3.0], [-0.5]]))
    assert int(ds["n_minima"]) == 2
    labels = ds["minimum"].values
    est = ds["estimate"].values[:, 0]
    assert len(set(labels[est > 0])) == 1 and len(set(labels[est < 0])) == 1
    np.testing.assert_allclose(np.abs(est), np.sqrt(np.sum(t * y) / np.sum(t * t)), rtol=1e-8)
    assert ds["cost"].values[int(ds["best_start"])] == ds["cost"].values.min()


def test_minima_near_zero_group_on_the_bounds_width():
    """Two fits of one minimum end 1e-5 apart at 6e-4, a third at -0.75: relative to their magnitudes alone
    (rtol 1e-4: 6e-8) the first two read as distinct minima; relative to the bounds' width (2: 2e-4) as one."""
    from sensitivity.analyses.calibration.statistics import distinct_minima

    estimates = np.array([[6.06e-4, 1.0], [6.16e-4, 1.0], [-0.75, 1.0]])
    cost, ok = np.array([46.2272177, 46.2272177, 46.9]), np.ones(3, bool)
    np.testing.assert_array_equal(distinct_minima(estimates, cost, ok, 1e-4), [0, 1, 2])
    np.testing.assert_array_equal(distinct_minima(estimates, cost, ok, 1e-4, scale=np.array([2.0, 2.0])), [0, 0, 1])


@pytest.mark.parametrize("known", [True, False])
def test_starts_far_above_the_best_are_rejected_not_minima(known):
    """y = sin(w t) has a local minimum in w at every few tenths: the fits from 12 starts end in several, all but
    one thousands of cost units above the best. Reference: scipy's least_squares from the same starts; a start is a
    minimum when its cost lies within chi2.ppf(0.999, 1) / 2 of the best (times s^2 = chi2_best / (m - 1) with
    unknown noise), every other converged start is rejected, and the summary gives their count and cost range."""
    from sensitivity.analyses.calibration.summary import summary

    t = np.linspace(0.0, 10.0, 40)

    def model(p):
        return np.sin(p * t), (t * np.cos(p * t))[..., None]

    sigma = 0.1
    y = np.sin(1.3 * t) + sigma * np.random.default_rng(0).standard_normal(t.size)
    starts = np.linspace(0.3, 3.6, 12)[:, None]
    ds = calibrate(BatchedModel(value_and_jacobian=model),
                   ObservationModel.from_arrays(y, sigma=sigma if known else None), starts=starts,
                   space=ParameterSpace.from_records([{"name": "w", "units": "rad s-1", "low": 0.1, "high": 4.0}]))
    weight = 1.0 / sigma if known else 1.0
    fits = [optimize.least_squares(lambda w: weight * (np.sin(w * t) - y), s, bounds=(0.1, 4.0), xtol=1e-14,
                                   ftol=1e-14, gtol=1e-14) for s in starts]
    cost = np.array([f.cost for f in fits])
    np.testing.assert_allclose(ds["cost"].values, cost, rtol=1e-6)
    scale = 1.0 if known else 2.0 * cost.min() / (t.size - 1)
    bound = stats.chi2.ppf(0.999, 1) / 2 * scale
    assert float(ds["minima_max_delta_cost"]) == pytest.approx(bound, rel=1e-6)
    rejected = cost > cost.min() + bound
    assert rejected.sum() >= 6 and (cost[rejected] > 100 * scale).all()  # far basins, not near-ties
    np.testing.assert_array_equal(ds["minimum"].values == -2, rejected)
    assert int(ds["n_minima"]) == 1 and int(ds["n_rejected"]) == rejected.sum()
    facts = {f.label: f.value for f in summary(ds).facts}
    assert facts["rejected starts"].startswith(f"{rejected.sum()}, cost ")
    assert "distinct minima" in facts and facts["distinct minima"].startswith("1 (cost within")


@pytest.mark.parametrize("known", [True, False])
def test_aic_bic_are_the_gaussian_log_likelihood(known):
    model, y, sigma, truth = problem(10)
    ds = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma if known else
                   None), starts=truth[None])
    resid = ds["residual"].values[0]
    scale = sigma if known else np.sqrt(np.mean(resid**2))
    k = 4 if known else 5
    neg2 = -2 * stats.norm.logpdf(resid, scale=scale).sum()
    np.testing.assert_allclose(ds["aic"].values[0], neg2 + 2 * k, rtol=1e-12)
    np.testing.assert_allclose(ds["bic"].values[0], neg2 + k * np.log(T.size), rtol=1e-12)
    np.testing.assert_allclose(ds["reduced_chi2"].values[0], ds["chi2"].values[0] / (T.size - 4), rtol=1e-12)


def test_failures_are_data_and_throw_only_when_all_fail():
    model, y, sigma, truth = problem(11)

    def nan_for_negative_a(p):
        values, jac = model(p)
        values[p[:, 0] < 0] = np.nan
        return values, jac

    ds = calibrate(BatchedModel(value_and_jacobian=nan_for_negative_a), ObservationModel.from_arrays(y, sigma=sigma),
                   starts=np.stack([truth, -truth]))
    assert ds["status"].values[1] == Status.NON_FINITE and ds["status"].values[0] > 0
    assert np.isnan(ds["estimate"].values[1]).all() and int(ds["best_start"]) == 0
    with pytest.raises(CalibrationError, match="all 1 starts failed"):
        calibrate(BatchedModel(value_and_jacobian=nan_for_negative_a), ObservationModel.from_arrays(y, sigma=sigma),
                  starts=-truth[None])
    capped = calibrate(BatchedModel(value_and_jacobian=model), ObservationModel.from_arrays(y, sigma=sigma),
                       Fit(solver=LevenbergMarquardt(max_iter=1), throw=False), starts=truth[None] * 3)
    assert capped["status"].values[0] == Status.MAX_ITER and capped["minimum"].values[0] == -1


def test_dataset_is_labeled_and_writes_to_netcdf(tmp_path):
    model, y, sigma, truth = problem(12)
    names, units = ["a", "b", "c", "d"], ["1", "s-1", "1", "s-1"]
    space = ParameterSpace.from_records([{"name": n, "units": u, "low": -1e9, "high": 1e9}
                                         for n, u in zip(names, units)])
    output = OutputSpec.from_dict({"names": [f"y{i}" for i in range(T.size)], "units": ["1"] * T.size})
    ds = calibrate(BatchedModel(value_and_jacobian=model, output=output), ObservationModel.from_arrays(y, sigma=sigma),
                   starts=truth[None], space=space)
    for name, var in ds.data_vars.items():
        assert "long_name" in var.attrs, name
    assert ds["estimate"].attrs["units_coordinate"] == "parameter_units"  # mixed units
    assert ds["prediction_band"].attrs["units"] == "1"
    by_name = ds.set_xindex("parameter_name")
    assert by_name["estimate"].sel(parameter_name="b").item() == ds["estimate"].values[0, 1]
    assert ds.sizes["iteration"] == ds["n_iterations"].values.max() + 1
    np.testing.assert_array_equal(ds["history_parameter"].values[0, -1], ds["estimate"].values[0])
    ds.to_netcdf(tmp_path / "calibration.nc", engine="netcdf4")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(sigma=np.r_[np.nan, np.ones(11)]), DataError, "`sigma` must be finite, got nan at observed output 'y0'"),
        (dict(sigma=np.r_[1.0, -1.0, np.ones(10)]), DataError, "`sigma` must be > 0, got -1.0 at output 'y1'"),
        (dict(sigma=np.ones(5)), DataError, r"`sigma` must have shape \[12\]"),
        (dict(cov=np.ones((12, 12))), DataError, "`cov` on the observed outputs must be positive definite"),
        (dict(cov=np.eye(12), sigma=1.0), ConfigError, "either `sigma` or `cov`"),
        (dict(starts=np.ones((2, 3)), space=ParameterSpace.from_records(
            [{"name": n, "units": "1", "low": -9.0, "high": 9.0} for n in "abcd"])), ConfigError,
         r"`starts` must have shape \[K, 4\]"),
        (dict(bounds=np.array([[0, 1], [3, 1], [0, 1], [0, 1]])), ConfigError, r"`bounds` for 'p1' must be low < high"),
        (dict(starts=np.full((1, 4), 5.0), bounds=np.tile([0.0, 1.0], (4, 1))), ConfigError, "outside its bounds"),
        (dict(prior_mean=np.zeros(4), prior_cov=np.eye(4)), ConfigError, "a prior needs observation errors"),
        (dict(sigma=1.0, prior_mean=np.zeros(4), prior_cov=-np.eye(4)), ConfigError, "`prior_cov` must be positive"),
        (dict(log_parameters=np.ones(4, bool), starts=-np.ones((1, 4))), ConfigError, "outside its bounds"),
        (dict(solver=LevenbergMarquardt(max_iter=1), y_obs=np.full(12, np.nan)), DataError, "no observation left"),
    ],
)
def test_bad_inputs_give_one_line_errors(kwargs, error, match):
    model, y, sigma, truth = problem(13)
    args = dict(y_obs=y, starts=truth[None])
    args.update(kwargs)
    with pytest.raises(error, match=match) as info:
        observations = ObservationModel.from_arrays(args.pop("y_obs"), **{k: args.pop(k) for k in ("sigma", "cov")
                                                                          if k in args})
        calibrate(BatchedModel(value_and_jacobian=model), observations, Fit(**{k: args.pop(k) for k in ("solver",)
                                                                               if k in args}), **args)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("bad", [dict(max_iter=0), dict(ftol=-1.0), dict(initial_damping=0.0)])
def test_bad_solver_settings(bad):
    with pytest.raises(ConfigError, match="LevenbergMarquardt"):
        LevenbergMarquardt(**bad)


def test_model_with_wrong_shapes_is_a_model_error():
    with pytest.raises(ModelError, match=r"values \[1, 12\]"):
        calibrate(BatchedModel(value_and_jacobian=lambda p: (np.zeros((1, 3)), np.zeros((1, 3, 4)))),
                  ObservationModel.from_arrays(np.ones(12)), starts=np.ones((1, 4)))


def test_identifiability_relative_to_a_prior_is_where_the_data_outweigh_it():
    """J_w = diag(10, 0.1): the data pin the first parameter to 0.1 and the second to 10 (standard deviations). With
    prior stds (1, 1) the data outweigh the prior on the first only (scaled singular values 10 and 0.1): (1, 0);
    with (1, 100) on both (10 and 10): (1, 1); a 45-degree rotation of the data shares one direction: (0.5, 0.5).
    The equilibrated measure without a prior says (1, 1) for all of them."""
    from sensitivity.analyses.calibration.statistics import prior_scaled_identifiability

    jac = np.array([[[10.0, 0.0], [0.0, 0.1]]])
    np.testing.assert_allclose(prior_scaled_identifiability(jac, np.array([1.0, 1.0])), [[1.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(prior_scaled_identifiability(jac, np.array([1.0, 100.0])), [[1.0, 1.0]], atol=1e-12)
    rotated = np.array([[[10.0, 10.0], [0.1, -0.1]]]) / np.sqrt(2)
    np.testing.assert_allclose(prior_scaled_identifiability(rotated, np.array([1.0, 1.0])), [[0.5, 0.5]], atol=1e-12)
    assert np.isnan(prior_scaled_identifiability(np.full((1, 2, 2), np.nan), np.ones(2))).all()
