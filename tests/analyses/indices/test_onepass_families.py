"""One-pass DGSM, active subspaces and Morris: each equal to its in-memory estimator on the same points and seed
to 1e-10, and to a closed form (a linear model's DGSM, a ridge function's active direction, a linear model's
elementary effects)."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import active_subspaces, dgsm, morris, onepass
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.analyses.moments import Moments
from sensitivity.errors import ConfigError
from tests.helpers.functions import ishigami, ishigami_jacobian, linear, linear_jacobian, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
PLANS = [IntervalPlan("rqmc", replicates=4), IntervalPlan("none")]


def ishigami_twice(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ishigami and Ishigami shifted by 1e4 (the one-pass variance must keep it), with their Jacobians."""
    y, jac = ishigami(x), ishigami_jacobian(x)
    return np.concatenate([y, y + 1e4], axis=1), np.concatenate([jac, jac], axis=1)


def assert_same(streamed, held) -> None:
    """Every variable and attribute of the in-memory result, to 1e-10 relative."""
    assert set(streamed.data_vars) == set(held.data_vars) and streamed.attrs == held.attrs
    for key in held.data_vars:
        np.testing.assert_allclose(streamed[key].values, held[key].values, rtol=1e-10, atol=0, err_msg=key)


# ----------------------------------------------------------------------------- the per-scrambling statistics
def test_replicates_split_blocks_at_the_scramblings_and_pool_to_numpys_moments():
    x = np.random.default_rng(0).normal(size=(96, 2, 3)) + 100.0
    stats = onepass.Replicates(96, 4, [[0, 0], [0, 1]])
    for lo, hi in ((0, 5), (5, 30), (30, 31), (31, 96)):  # blocks straddling the scramblings' edges at 24, 48, 72
        stats.update(x[lo:hi])
    pooled, *parts = stats.sets()
    for got, rows in zip([pooled, *parts], [x, *np.split(x, 4)]):
        np.testing.assert_allclose(got.mean, rows.mean(axis=0), rtol=1e-14)
        cov = np.mean((rows[:, 0] - rows[:, 0].mean(0)) * (rows[:, 1] - rows[:, 1].mean(0)), axis=0)
        np.testing.assert_allclose(got.covariance()[1], cov, rtol=1e-10)


def test_sample_blocks_are_the_whole_sample_in_order():
    whole = dgsm.sample(ISHIGAMI, 256, seed=5, replicates=4)
    np.testing.assert_array_equal(np.concatenate(list(onepass.sample_blocks(ISHIGAMI, 256, seed=5, replicates=4,
                                                                             block=32))), whole)


# ----------------------------------------------------------------------------- DGSM
@pytest.mark.parametrize("plan", PLANS, ids=["rqmc", "none"])
def test_dgsm_in_one_pass_equals_the_in_memory_estimator(plan):
    replicates = plan.replicates if plan.kind == "rqmc" else 1
    points = dgsm.sample(ISHIGAMI, 512, seed=7, replicates=replicates)
    values, jac = ishigami_twice(points)
    held = dgsm.analyze(jac, values, ISHIGAMI, intervals=plan)
    assert_same(dgsm.analyze_model(ishigami_twice, ISHIGAMI, 512, seed=7, intervals=plan, block=64), held)


def test_dgsm_in_one_pass_of_a_linear_model_is_its_squared_slopes():
    # nu_ik = a_ki^2 at every point; V_k = sum_i a_ki^2 (b - a)^2 / 12 up to the QMC error of the variance (1.6e-4
    # relative here: 8 scramblings of 512 points, each variance with its own centre)
    w = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])
    space = uniform_space(3, 0.0, 2.0)
    ds = dgsm.analyze_model(lambda x: (linear(x, w, np.zeros(2)), linear_jacobian(x, w)), space, 4096, seed=1,
                            intervals=IntervalPlan("rqmc"), block=256)
    np.testing.assert_allclose(ds.nu.values, (w**2).T, rtol=1e-14)
    np.testing.assert_allclose(ds.nu_interval.values, np.repeat((w**2).T[..., None], 2, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(ds.variance.values, (w**2).sum(axis=1) * 4 / 12, rtol=1e-3)


def test_dgsm_in_one_pass_refuses_the_bootstrap():
    with pytest.raises(ConfigError, match="intervals.*bootstrap"):
        dgsm.analyze_model(ishigami_twice, ISHIGAMI, 64, intervals=IntervalPlan("bootstrap"))


# ----------------------------------------------------------------------------- active subspaces
RIDGE = np.array([0.6, -0.8, 0.0])  # a unit direction in the inputs normalised by bounds ([-1, 1] here)
RIDGE_SPACE = uniform_space(3, -1.0, 1.0)


def ridge(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``sin(w^T x)`` and ``1e3 + (w^T x)^2 + 0.1 x_2``: values and Jacobians ``[N, 2, 3]``."""
    t = x @ RIDGE
    values = np.stack([np.sin(t), 1e3 + t**2 + 0.1 * x[:, 2]], axis=1)
    jac = np.stack([np.cos(t)[:, None] * RIDGE, 2 * t[:, None] * RIDGE + [0.0, 0.0, 0.1]], axis=1)
    return values, jac


@pytest.mark.parametrize("plan", PLANS, ids=["rqmc", "none"])
@pytest.mark.parametrize("weights", [None, [1.0, -0.5]], ids=["per_output", "quantity"])
def test_active_subspaces_in_one_pass_equal_the_in_memory_estimator(plan, weights):
    replicates = plan.replicates if plan.kind == "rqmc" else 1
    held = active_subspaces.analyze(ridge(dgsm.sample(RIDGE_SPACE, 512, seed=2, replicates=replicates))[1],
                                    RIDGE_SPACE, intervals=plan, weights=weights, quantity_name="q")
    streamed = active_subspaces.analyze_model(ridge, RIDGE_SPACE, 512, seed=2, intervals=plan, weights=weights,
                                              quantity_name="q", block=64)
    assert set(streamed.data_vars) == set(held.data_vars) and streamed.attrs.keys() == held.attrs.keys()
    top = held.eigenvalue.max().item()
    for key in ("eigenvalue", "activity_score", "n_active", *(("eigenvalue_interval",) if plan.kind == "rqmc" else ())):
        # eigenvalues are known to the round-off of C, eps * lambda_1, whatever their size
        np.testing.assert_allclose(streamed[key].values, held[key].values, rtol=1e-10, atol=1e-12 * top, err_msg=key)
    w1 = held.eigenvector.isel(direction=0)  # the first direction is separated; the null space's basis is not
    np.testing.assert_allclose(streamed.eigenvector.isel(direction=0).values, w1.values, atol=1e-10)


def test_active_subspace_of_a_ridge_function_in_one_pass_is_its_direction():
    # C = E[cos^2(w^T x)] w w^T: rank one, the first eigenvector w (sign fixed: largest component positive), the
    # others with eigenvalue 0, n_active 1
    ds = active_subspaces.analyze_model(ridge, RIDGE_SPACE, 4096, seed=3, intervals=IntervalPlan("rqmc"))
    first = ds.isel(output=0)
    np.testing.assert_allclose(first.eigenvector.isel(direction=0).values, -RIDGE, atol=1e-12)
    assert first.eigenvalue.values[1:].max() <= 1e-14 * first.eigenvalue.values[0]
    assert first.n_active.item() == 1


# ----------------------------------------------------------------------------- Morris
@pytest.mark.parametrize("plan", [IntervalPlan("bootstrap", n_resamples=30, seed=4), IntervalPlan("none")],
                         ids=["bootstrap", "none"])
def test_morris_in_one_pass_equals_the_in_memory_estimator(plan):
    def model(x):
        return np.concatenate([ishigami(x), ishigami(x) ** 2 + 1e4], axis=1)

    points = morris.sample(ISHIGAMI, 40, levels=6, seed=9)
    held = morris.analyze(points, model(points), ISHIGAMI, levels=6, intervals=plan)
    drawn = morris.trajectories(ISHIGAMI, 40, levels=6, seed=9)
    assert_same(morris.analyze_model(model, drawn, ISHIGAMI, levels=6, intervals=plan, block=24), held)


def test_morris_in_one_pass_of_a_linear_model_is_its_slopes_times_the_step():
    # y = a^T x on [0, 2]^3: every elementary effect of x_i is a_i (b - a) = 2 a_i per unit quantile, so
    # mu = 2 a_i, mu* = 2 |a_i|, sigma = 0 and every bootstrap mean of |EE| is 2 |a_i|
    w = np.array([[1.0, -2.0, 0.5]])
    space = uniform_space(3, 0.0, 2.0)
    drawn = morris.trajectories(space, 64, levels=4, seed=1)
    ds = morris.analyze_model(lambda x: linear(x, w, np.zeros(1)), drawn, space, levels=4,
                              intervals=IntervalPlan("bootstrap", n_resamples=20, seed=2), block=16)
    np.testing.assert_allclose(ds.mu.values[:, 0], 2 * w[0], rtol=1e-12)
    np.testing.assert_allclose(ds.mu_star.values[:, 0], 2 * np.abs(w[0]), rtol=1e-12)
    np.testing.assert_allclose(ds.sigma.values[:, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(ds.mu_star_interval.values[:, 0], np.repeat(2 * np.abs(w[0])[:, None], 2, 1),
                               rtol=1e-12)
