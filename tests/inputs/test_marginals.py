"""Any scipy.stats marginal by name, truncation on either side, bounds derived from the distribution.

Oracles: scipy's own distributions (``scipy.stats.truncnorm``, conditional moments by ``expect``),
closed forms of the truncated Gumbel and the Beta, and the old five kinds' config syntax.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.indices import design
from sensitivity.inputs.space import BOUND_QUANTILES, ParameterSpace


def space(**distribution):
    return ParameterSpace.from_records([{"name": "x", "units": "1", "distribution": distribution}])


def test_truncated_gumbel_matches_its_closed_form():
    """F_T(x) = (F(x) - F(a)) / (F(b) - F(a)) with the Gumbel F(x) = exp(-exp(-(x - mu) / beta))."""
    p = space(kind="gumbel_r", loc=1013.0, scale=558.0, truncate=[500.0, 3000.0]).parameters[0]
    assert (p.low, p.high) == (500.0, 3000.0)
    gumbel = lambda x: math.exp(-math.exp(-(x - 1013.0) / 558.0))  # noqa: E731
    frozen = p.frozen_distribution()
    for q in (1e-9, 0.1, 0.5, 0.9, 1 - 1e-9):
        x = float(frozen.ppf(q))
        assert (gumbel(x) - gumbel(500.0)) / (gumbel(3000.0) - gumbel(500.0)) == pytest.approx(q, rel=1e-9, abs=1e-12)
        assert float(frozen.isf(1 - q)) == pytest.approx(x, rel=1e-9)
    density = lambda x: stats.gumbel_r.pdf(x, 1013.0, 558.0)  # noqa: E731
    from scipy import integrate
    mass = integrate.quad(density, 500.0, 3000.0)[0]
    mean = integrate.quad(lambda x: x * density(x), 500.0, 3000.0)[0] / mass
    assert frozen.mean() == pytest.approx(mean, rel=1e-9)


def test_one_sided_truncated_normal_is_scipys_truncnorm():
    p = space(kind="norm", loc=30.0, scale=8.0, truncate=[15.0, None]).parameters[0]
    oracle = stats.truncnorm((15.0 - 30.0) / 8.0, np.inf, loc=30.0, scale=8.0)
    q = np.array([0.001, 0.3, 0.5, 0.999])
    np.testing.assert_allclose(p.frozen_distribution().ppf(q), oracle.ppf(q), rtol=1e-12)
    assert p.frozen_distribution().mean() == pytest.approx(oracle.mean(), rel=1e-12)
    assert p.low == 15.0 and p.high == pytest.approx(oracle.ppf(BOUND_QUANTILES[1]), rel=1e-12)


def test_one_sided_upper_truncation_of_a_gamma():
    p = space(kind="gamma", a=2.0, scale=3.0, truncate=[None, 10.0]).parameters[0]
    frozen, base = p.frozen_distribution(), stats.gamma(2.0, scale=3.0)
    x = np.array([0.5, 4.0, 9.0])
    np.testing.assert_allclose(frozen.cdf(x), base.cdf(x) / base.cdf(10.0), rtol=1e-12)
    assert (p.low, p.high) == (0.0, 10.0)


@pytest.mark.parametrize(("distribution", "oracle"), [
    ({"kind": "beta", "a": 2.0, "b": 5.0, "loc": 1.0, "scale": 3.0}, stats.beta(2.0, 5.0, loc=1.0, scale=3.0)),
    ({"kind": "lognorm", "s": 0.25, "scale": 2.0e11}, stats.lognorm(0.25, scale=2.0e11)),
    ({"kind": "weibull_min", "c": 1.5, "scale": 2.0}, stats.weibull_min(1.5, scale=2.0)),
    ({"kind": "normal", "mean": 1.0, "std": 2.0}, stats.norm(1.0, 2.0)),                # the old kinds
    ({"kind": "lognormal", "median": 2.0, "sigma_log": 0.3}, stats.lognorm(0.3, scale=2.0)),
])
def test_bounds_follow_the_documented_rule_and_sampling_uses_the_quantiles(distribution, oracle):
    p = space(**distribution).parameters[0]
    support = oracle.support()
    bounded = all(np.isfinite(support))
    expected = support if bounded else oracle.ppf(BOUND_QUANTILES)
    np.testing.assert_allclose([p.low, p.high], expected, rtol=1e-12)
    u = np.linspace(0.01, 0.99, 7)[:, None]
    np.testing.assert_allclose(design.to_distribution(ParameterSpace((p,)), u)[:, 0], oracle.ppf(u[:, 0]), rtol=1e-10)


def test_old_kinds_on_bounds_still_work():
    s = ParameterSpace.from_records([
        {"name": "a", "units": "1", "low": 0.0, "high": 2.0},
        {"name": "b", "units": "1", "low": 0.0, "high": 2.0, "distribution": {"kind": "triangular", "mode": 0.5}},
        {"name": "c", "units": "1", "low": 0.0, "high": 2.0,
         "distribution": {"kind": "truncnormal", "mean": 0.5, "std": 1.0}},
    ])
    u = np.full((1, 3), 0.25)
    x = design.to_distribution(s, u)[0]
    assert x[0] == pytest.approx(0.5)
    assert x[1] == pytest.approx(stats.triang(0.25, loc=0.0, scale=2.0).ppf(0.25))
    assert x[2] == pytest.approx(stats.truncnorm(-0.5, 1.5, loc=0.5, scale=1.0).ppf(0.25))


def test_a_grid_through_the_distribution_follows_the_quantiles_within_the_bounds():
    from scipy.stats import qmc

    from sensitivity.errors import ConfigError
    from sensitivity.sweep.designs import make_grid

    s = ParameterSpace.from_records([
        {"name": "q", "units": "1", "distribution": {"kind": "gumbel_r", "loc": 1013.0, "scale": 558.0,
                                                     "truncate": [500.0, 3000.0]}},
        {"name": "k", "units": "1", "distribution": {"kind": "norm", "loc": 30.0, "scale": 8.0}},
    ])
    grid = make_grid(s, "sobol", n=256, seed=3, through="distribution")
    unit = qmc.Sobol(d=2, scramble=True, rng=np.random.default_rng(3)).random(256)
    gumbel = stats.gumbel_r(1013.0, 558.0)
    a, b = gumbel.cdf([500.0, 3000.0])
    np.testing.assert_allclose(grid.points()[:, 0], gumbel.ppf(a + unit[:, 0] * (b - a)), rtol=1e-10)
    low, high = stats.norm(30.0, 8.0).ppf(BOUND_QUANTILES)  # the derived bounds of the untruncated normal
    c, d = stats.norm.cdf([(low - 30.0) / 8.0, (high - 30.0) / 8.0])
    np.testing.assert_allclose(grid.points()[:, 1], 30.0 + 8.0 * stats.norm.ppf(c + unit[:, 1] * (d - c)), rtol=1e-9)
    assert make_grid(s, "lhs", n=64, through="distribution").points().shape == (64, 2)
    with pytest.raises(ConfigError, match="grid.through must be one of"):
        make_grid(s, "sobol", n=8, through="quantiles")
