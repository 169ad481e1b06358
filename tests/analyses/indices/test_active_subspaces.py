"""Active subspaces: linear (rank one, exact), quadratic (closed-form C, also of dependent inputs), DGSM identity,
weighted quantities."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import active_subspaces, dgsm
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from tests.helpers.functions import ishigami_jacobian, linear_jacobian, uniform_space


def test_linear_model_is_rank_one_and_exact():
    w = np.array([[1.0, -2.0, 0.5]])
    space = uniform_space(3, 0.0, 4.0)  # normalised inputs z in [-1, 1]: grad_z = w (b - a) / 2 = 2 w
    x = active_subspaces.sample(space, 64, seed=0)
    ds = active_subspaces.analyze(linear_jacobian(x, w), space, intervals=IntervalPlan("rqmc", n_resamples=10, seed=0))
    g = 2 * w[0]
    np.testing.assert_allclose(ds.eigenvalue.isel(output=0), [g @ g, 0, 0], atol=1e-12)
    leading = ds.eigenvector.isel(output=0, direction=0).values
    np.testing.assert_allclose(leading, -g / np.linalg.norm(g), atol=1e-12)  # sign: largest component positive
    np.testing.assert_allclose(ds.activity_score.isel(output=0), g**2, atol=1e-12)
    assert int(ds.n_active[0]) == 1


def test_quadratic_eigenvalues_match_closed_form():
    # f = x^T H x / 2 on U[-1, 1]^3: grad f = H x, E[x x^T] = I / 3, so C = H^2 / 3 with eigenvalues eig(H)^2 / 3.
    # N = 8192 QMC points: the sample second moments err by < 0.1 % here, so rtol 1 %.
    h = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 0.3]])
    space = uniform_space(3, -1.0, 1.0)
    x = active_subspaces.sample(space, 8192, seed=4)
    ds = active_subspaces.analyze((x @ h)[:, None, :], space, intervals=IntervalPlan("rqmc", n_resamples=50, seed=1))
    lam, vec = np.linalg.eigh(h @ h / 3)
    np.testing.assert_allclose(ds.eigenvalue.isel(output=0), lam[::-1], rtol=0.01)
    assert abs(ds.eigenvector.isel(output=0, direction=0).values @ vec[:, -1]) == pytest.approx(1.0, abs=1e-3)
    low, high = ds.eigenvalue_interval.isel(output=0).values.T
    assert (low <= ds.eigenvalue.isel(output=0).values).all() and (ds.eigenvalue.isel(output=0).values <= high).all()


def test_full_activity_scores_equal_normalised_dgsm():
    # sum_j lambda_j w_ij^2 = C_ii = E[(df/dz_i)^2] = nu_i ((b - a) / 2)^2: two methods, one identity.
    space = uniform_space(3, -np.pi, np.pi)
    x = dgsm.sample(space, 1024, seed=0)
    jac = np.concatenate([ishigami_jacobian(x), 3 * ishigami_jacobian(x) ** 2], axis=1)
    ds = active_subspaces.analyze(jac, space, n_active=3, intervals=IntervalPlan("rqmc", n_resamples=10, seed=0))
    nu = dgsm.analyze(jac, np.zeros(jac.shape[:2]), space, intervals=IntervalPlan("rqmc", n_resamples=10)).nu
    np.testing.assert_allclose(ds.activity_score.values, nu.values * np.pi**2, rtol=1e-10)


def test_weighted_quantity_equals_the_analysis_of_that_output():
    space = uniform_space(3, -np.pi, np.pi)
    x = dgsm.sample(space, 256, seed=2)
    jac = np.concatenate([ishigami_jacobian(x), np.cos(x)[:, None, :]], axis=1)
    per_output = active_subspaces.analyze(jac, space, intervals=IntervalPlan("rqmc", n_resamples=10, seed=3))
    weighted = active_subspaces.analyze(jac, space, weights=[0.0, 2.0], quantity_name="q",
                                        intervals=IntervalPlan("rqmc", n_resamples=10, seed=3))
    assert list(weighted.output_name.values) == ["q"]
    np.testing.assert_allclose(weighted.eigenvalue.isel(output=0), 4 * per_output.eigenvalue.isel(output=1), rtol=1e-12)
    np.testing.assert_allclose(
        np.abs(weighted.eigenvector.isel(output=0)), np.abs(per_output.eigenvector.isel(output=1)), atol=1e-10
    )


def test_bad_inputs_are_clear_errors():
    space = uniform_space(3, 0.0, 1.0)
    jac = np.ones((8, 2, 3))
    with pytest.raises(ConfigError, match=r"`weights` must give one weight per output \(2\)"):
        active_subspaces.analyze(jac, space, weights=[1.0])
    with pytest.raises(ConfigError, match="`normalize` must be one of"):
        active_subspaces.analyze(jac, space, normalize="range")
    with pytest.raises(ConfigError, match=r"`n_active` must be an integer in \[1, 3\]"):
        active_subspaces.analyze(jac, space, n_active=4)


def test_dependent_inputs_give_c_under_the_joint_law():
    # f = x^T H x / 2 with x ~ N(0, S) coupled by the copula: grad f = H x, so C = H S H (normalize none).
    # N = 65536 as 8 scramblings: 10 seeds, largest relative eigenvalue error 0.05 % -> 0.2 %.
    sd, r = np.array([1.0, 2.0, 0.5]), np.array([[1.0, 0.7, 0.0], [0.7, 1.0, -0.3], [0.0, -0.3, 1.0]])
    space = ParameterSpace.from_records([dict(name=f"x{i}", units="1", distribution=dict(kind="norm", loc=0.0,
                                                                                         scale=float(sd[i])))
                                         for i in range(3)], r.tolist())
    h = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 0.3]])
    x = active_subspaces.sample(space, 65536, seed=1)
    ds = active_subspaces.analyze((x @ h)[:, None, :], space, normalize="none")
    exact = np.linalg.eigvalsh(h @ (r * np.outer(sd, sd)) @ h)[::-1]
    np.testing.assert_allclose(ds.eigenvalue.isel(output=0), exact, rtol=0.002)
    assert ds.attrs["inputs"] == "dependent (Gaussian copula): C under the joint law"
