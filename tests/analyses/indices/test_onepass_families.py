"""One-pass DGSM, active subspaces and Morris: each equal to its in-memory estimator on the same points and seed
to 1e-10, and to a closed form (a linear model's DGSM, a ridge function's active direction, a linear model's
elementary effects)."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import dgsm, onepass
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
