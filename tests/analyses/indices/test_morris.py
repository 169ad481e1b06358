"""Morris elementary effects: SALib 1.6 as an oracle on identical trajectories, the linear model, bad inputs."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from SALib.analyze import morris as salib_morris

from sensitivity.analyses.indices import morris
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import Distribution, Parameter, ParameterSpace
from tests.helpers.functions import ishigami, linear, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
PROBLEM = {"num_vars": 3, "names": ["x0", "x1", "x2"], "bounds": [[-np.pi, np.pi]] * 3}


@pytest.mark.parametrize("levels", [4, 6])
def test_matches_salib_on_identical_trajectories(levels):
    x = morris.sample(ISHIGAMI, 40, levels=levels, seed=3)
    y = np.column_stack([ishigami(x)[:, 0], np.cos(x[:, 0]) * x[:, 1] ** 2])
    ds = morris.analyze(x, y, ISHIGAMI, levels=levels, intervals=IntervalPlan("bootstrap", n_resamples=50,
                        interval="normal", seed=17))
    for k in range(y.shape[1]):
        ref = salib_morris.analyze(dict(PROBLEM), x, y[:, k].copy(), num_resamples=50, num_levels=levels, seed=17)
        out = ds.isel(output=k)
        np.testing.assert_allclose(out.mu, ref["mu"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(out.mu_star, ref["mu_star"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(out.sigma, ref["sigma"], rtol=0, atol=1e-10)
        np.testing.assert_allclose(out.mu_star_interval.sel(bound=1) - out.mu_star, ref["mu_star_conf"], rtol=0, atol=1e-10)


def test_trajectories_are_one_at_a_time_on_the_grid():
    levels, r = 4, 25
    space = uniform_space(5, 0.0, 3.0)
    x = morris.sample(space, r, levels=levels, seed=1)
    assert x.shape == (r * 6, 5)
    steps = np.diff(x.reshape(r, 6, 5), axis=1)
    moved = steps != 0
    assert (moved.sum(axis=2) == 1).all() and (moved.sum(axis=1) == 1).all()  # each parameter moves once
    np.testing.assert_allclose(np.abs(steps[moved]), 3.0 * morris.delta(levels))  # Delta = 2/3 of the range
    np.testing.assert_allclose(np.unique(np.round(x / 3.0 * (levels - 1), 12)), np.arange(levels))  # grid levels
    np.testing.assert_array_equal(x, morris.sample(space, r, levels=levels, seed=1))  # seeded


def test_linear_model_is_exact():
    # y = c . x with x_i uniform on [0, 3]: every elementary effect is c_i (b - a) = 3 c_i per unit quantile.
    c = np.array([[2.0, -1.0, 0.5, 0.0]])
    space = uniform_space(4, 0.0, 3.0, units="m")
    x = morris.sample(space, 10, seed=2)
    ds = morris.analyze(x, linear(x, c, np.array([1.0])), space, output_units=["kg"],
                        intervals=IntervalPlan("bootstrap", seed=0))
    np.testing.assert_allclose(ds.mu.isel(output=0), 3 * c[0], atol=1e-12)
    np.testing.assert_allclose(ds.mu_star.isel(output=0), 3 * np.abs(c[0]), atol=1e-12)
    np.testing.assert_allclose(ds.sigma.isel(output=0), 0.0, atol=1e-12)
    assert ds.mu_star.attrs["units"] == "kg"


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ConfigError, match="`levels` must be an even integer"):
        morris.sample(ISHIGAMI, 10, levels=5)
    unbounded = ParameterSpace(
        (Parameter("k", "1", -1.0, 1.0, distribution=Distribution("normal", {"mean": 0.0, "std": 1.0})),)
    )
    x = morris.sample(unbounded, 10, levels=4, seed=0)  # an unbounded marginal: truncated at the bounds
    expected = stats.truncnorm(-1.0, 1.0).ppf([0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0])
    assert np.isin(np.round(x[:, 0], 12), np.round(expected, 12)).all()
    x = morris.sample(ISHIGAMI, 4, seed=0)
    with pytest.raises(DataError, match=r"`points` must have shape \[r\*4, 3\]"):
        morris.analyze(x[:-1], ishigami(x[:-1]), ISHIGAMI)
    shuffled = x.copy()
    shuffled[[1, 2]] = shuffled[[2, 1]]
    with pytest.raises(DataError, match="trajectory 0"):
        morris.analyze(shuffled, ishigami(shuffled), ISHIGAMI)


def test_a_lognormal_is_screened_within_the_bounds():
    from sensitivity.inputs.space import BOUND_QUANTILES

    space = ParameterSpace((Parameter("k", "1", distribution=Distribution("lognorm", {"s": 0.5, "scale": 2.0})),))
    x = morris.sample(space, 8, levels=4, seed=1)[:, 0]
    low, high = stats.lognorm(0.5, scale=2.0).ppf(BOUND_QUANTILES)
    assert x.min() == pytest.approx(low, rel=1e-9) and x.max() == pytest.approx(high, rel=1e-9)
