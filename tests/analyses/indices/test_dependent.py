"""Indices of dependent inputs against closed forms: Shapley effects, full/independent Sobol' indices, given data.

The reference is a linear model ``Y_k = beta_k^T x`` of correlated Gaussian inputs ``x ~ N(mu, S)``, whose
conditional variances are exact for every subset ``u`` of inputs by Gaussian conditioning
(:mod:`tests.helpers.closed_forms`): ``Var(E[Y | x_u]) = beta^T S_{:,u} S_uu^-1 S_{u,:} beta``. From them: the Shapley effects (Owen's formula over
every subset), ``S1_full_i = Var(E[Y|x_i]) / V``, ``ST_ind_i = 1 - Var(E[Y|x_~i]) / V``; a linear model has no
interactions, so ``ST_full = S1_full`` and ``S1_ind = ST_ind``. Independent Ishigami gives the Shapley effects
``S1 + S13 / 2`` (x1), ``S1`` (x2), ``S13 / 2`` (x3).
"""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import given_data, shapley, sobol, sobol_dependent
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.inputs import copula
from sensitivity.errors import ConfigError, DataError
from tests.helpers.closed_forms import CORRELATION, MU, SD, SPACE, exact_indices, linear
from tests.helpers.functions import ishigami, ishigami_indices, uniform_space

def shapley_of(space, f, seed, **sizes):
    kwargs = dict(n_variance=16384, n_outer=2048, n_inner=3, n_permutations=8192, exact_up_to=6) | sizes
    design = shapley.sample(space, seed=seed, **kwargs)
    return shapley.analyze_model(f, design, space)


def test_conditional_draws_have_the_gaussian_conditional_law():
    # The part of subset J = {x0, x2}: inner draws given x1 must scatter with cov R_JJ - R_J1 R_11^-1 R_1J.
    design = shapley.sample(SPACE, n_variance=16, n_outer=2000, n_inner=50, n_permutations=2, exact_up_to=6, seed=3)
    k = next(k for k, p in enumerate(design.parts) if p.kind == "subset" and p.subset.tolist() == [True, False, True])
    z = ((design.points(k) - MU) / SD).reshape(2000, 50, 3)
    assert np.ptp(z[:, :, 1], axis=1).max() == 0  # x1 fixed within each outer draw
    j, c = [0, 2], [1]
    expected = CORRELATION[np.ix_(j, j)] - CORRELATION[np.ix_(j, c)] @ CORRELATION[np.ix_(c, j)]
    centred = z[:, :, j] - z[:, :, j].mean(axis=1, keepdims=True)
    cov = np.einsum("oha,ohb->ab", centred, centred) / (2000 * 49)
    np.testing.assert_allclose(cov, expected, atol=0.01)  # 98 000 degrees of freedom: sd ~0.003
    slope = np.polyfit(z[:, 0, 1], z[:, :, 0].mean(axis=1), 1)[0]
    assert slope == pytest.approx(CORRELATION[0, 1], abs=0.02)  # E[z0 | z1] = r01 z1


def test_orders_of_the_copula_factor_agree():
    scores = copula.NormalScores.of(SPACE)
    e = np.random.default_rng(0).standard_normal((1, 200000, 3))
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        z = scores.in_order(np.array([order]), e)[0]
        np.testing.assert_allclose(np.corrcoef(z.T), CORRELATION, atol=0.01)


@pytest.mark.parametrize("exact_up_to", [6, 2], ids=["exact", "random"])
def test_shapley_effects_of_correlated_gaussian_linear_model(exact_up_to):
    ds = shapley_of(SPACE, linear, seed=1, exact_up_to=exact_up_to)
    exact = exact_indices()
    assert ds.attrs["permutations"] == ("exact" if exact_up_to == 6 else "random")
    assert ds.attrs["inputs"] == "dependent (Gaussian copula)"
    error = ds.effect.values - exact["effect"]
    assert (np.abs(error) <= 4 * ds.effect_se.values).all(), (error, ds.effect_se.values)
    assert ds.effect_se.max() < 0.02
    np.testing.assert_allclose(ds.effect.sum("parameter"), 1.0, rtol=1e-12)  # the increments telescope
    low, high = ds.effect_interval.sel(bound=0), ds.effect_interval.sel(bound=1)
    np.testing.assert_allclose((high - low) / 2, 1.959964 * ds.effect_se, rtol=1e-6)
    if exact_up_to == 6:  # the same subset costs give the full first-order and independent total indices
        for key in ("S1_full", "ST_ind"):
            error = ds[key].values - exact[key]
            assert (np.abs(error) <= 4 * ds[f"{key}_se"].values).all(), (key, error)
    else:
        assert ds.attrs["n_permutations"] == 8192 and "S1_full" not in ds


def test_shapley_standard_errors_are_calibrated():
    # Over 16 seeds, the errors divided by their standard errors should scatter like N(0, 1).
    exact = exact_indices()["effect"]
    z = np.concatenate([((ds.effect.values - exact) / ds.effect_se.values).ravel() for ds in
                        (shapley_of(SPACE, linear, seed=s, n_outer=512, n_variance=4096) for s in range(16))])
    assert 0.7 < z.std() < 1.3 and abs(z.mean()) < 0.35, (z.mean(), z.std())


def test_shapley_effects_of_independent_ishigami():
    space = uniform_space(3, -np.pi, np.pi)
    ds = shapley_of(space, ishigami, seed=2, n_outer=8192, n_variance=65536)
    exact = ishigami_indices()
    s1, st, s13 = exact["S1"], exact["ST"], exact["S13"]
    expected = s1 + np.array([s13 / 2, 0.0, s13 / 2])
    effect, se = ds.effect.isel(output=0).values, ds.effect_se.isel(output=0).values
    assert (np.abs(effect - expected) <= 4 * se).all(), (effect, expected, se)
    assert (effect >= s1 - 4 * se).all() and (effect <= st + 4 * se).all()  # S1 <= Sh <= ST
    assert effect.sum() == pytest.approx(1.0, rel=1e-12) and ds.attrs["inputs"] == "independent"
    assert (np.abs(ds.ST_ind.isel(output=0).values - st) <= 4 * ds.ST_ind_se.isel(output=0).values).all()


def test_full_and_independent_sobol_indices_of_correlated_gaussian_linear_model():
    # N = 8192 as 8 scramblings of 1024: 10 seeds, largest error 0.0016 -> 0.005.
    x = sobol_dependent.sample(SPACE, 8192, seed=4)
    assert x.shape == (8192 * 8, 3)
    ds = sobol_dependent.analyze(linear(x), SPACE, intervals=IntervalPlan("rqmc", seed=4))
    exact = exact_indices()
    for key in ("S1_full", "ST_full", "S1_ind", "ST_ind"):
        np.testing.assert_allclose(ds[key].values, exact[key], atol=0.005, err_msg=key)
        low, high = ds[f"{key}_interval"].sel(bound=0), ds[f"{key}_interval"].sel(bound=1)
        assert (low <= ds[key]).all() and (ds[key] <= high).all()
    assert ds.attrs["inputs"] == "dependent (Gaussian copula)" and ds.S1_full.attrs["units"] == "1"


def test_dependent_indices_of_independent_inputs_are_the_classic_ones():
    # N = 8192 as 8 scramblings of 1024: 10 seeds, largest error 0.0081 -> 0.012.
    space = uniform_space(3, -np.pi, np.pi)
    x = sobol_dependent.sample(space, 8192, seed=5)
    ds = sobol_dependent.analyze(ishigami(x), space, intervals=IntervalPlan("rqmc", seed=5))
    exact = ishigami_indices()
    for key, ref in (("S1_full", "S1"), ("S1_ind", "S1"), ("ST_full", "ST"), ("ST_ind", "ST")):
        np.testing.assert_allclose(ds[key].isel(output=0), exact[ref], atol=0.012, err_msg=key)
    # Without a correlation matrix the full and independent pick-freeze columns are the same points (to rounding).
    rows = x.reshape(8192, 8, 3)
    np.testing.assert_allclose(rows[:, 1:4], rows[:, 4:7], rtol=0, atol=1e-12)


def test_given_data_gives_the_full_first_order_index_of_dependent_inputs():
    # N = 65536 i.i.d. draws of the copula: the rank estimator's error ~ 1/sqrt(N); 10 seeds, largest 0.0071 -> 0.012.
    x = given_data.sample(SPACE, 65536, seed=6)
    ds = given_data.analyze(x, linear(x), SPACE, seed=6)
    np.testing.assert_allclose(ds.S1.values, exact_indices()["S1_full"], atol=0.012)
    assert ds.attrs["inputs"] == "dependent (full first-order indices)"


def test_classic_sobol_refusal_points_to_the_dependent_methods():
    with pytest.raises(ConfigError, match="use method `sobol_dependent`.* or `shapley`"):
        sobol.sample(SPACE, 64)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_inner": 1}, "`n_inner` must be an integer >= 2, got 1"),
    ({"n_outer": 0}, "`n_outer` must be an integer >= 2, got 0"),
    ({"exact_up_to": 0}, "`exact_up_to` must be an integer >= 1, got 0"),
])
def test_bad_shapley_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        shapley.sample(SPACE, **(dict(n_variance=16, n_outer=4, n_inner=3, n_permutations=4, exact_up_to=6) | kwargs))


def test_shapley_values_of_the_wrong_size_are_refused():
    design = shapley.sample(SPACE, n_variance=16, n_outer=4, n_inner=3, n_permutations=4, exact_up_to=6, seed=0)
    with pytest.raises(DataError, match=f"`values` must have {design.n_points} rows"):
        shapley.analyze(np.zeros((design.n_points - 1, 1)), design, SPACE)
