"""Vectorised quantile transforms against scipy.stats (the oracle), in both tails."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from sensitivity.inputs.quantiles import quantile_from_normal

Z = np.concatenate([np.linspace(-8.2, 8.2, 2001), np.random.default_rng(0).normal(size=5000)])

MARGINALS = {
    "normal": stats.norm(loc=3.0, scale=0.5),
    "lognormal": stats.lognorm(s=0.7, scale=2.5),
    "uniform": stats.uniform(loc=-1.0, scale=4.0),
    "triangular": stats.triang(c=0.3, loc=1.0, scale=2.0),
    "triangular at the low end": stats.triang(c=0.0, loc=1.0, scale=2.0),
    "truncnormal centred": stats.truncnorm(-2.0, 2.0, loc=1.0, scale=0.3),
    "truncnormal lopsided": stats.truncnorm(-0.5, 3.0, loc=10.0, scale=2.0),
    "truncnormal upper tail": stats.truncnorm(2.0, 4.0, loc=0.0, scale=1.0),
    "truncnormal lower tail": stats.truncnorm(-6.0, -5.0, loc=5.0, scale=1.0),
    "truncnormal one-sided": stats.truncnorm(0.0, np.inf, loc=0.0, scale=1.0),
    "truncnormal far tail": stats.truncnorm(-45.0, -40.0, loc=0.0, scale=1.0),
    "gamma (scipy fallback)": stats.gamma(2.0, scale=3.0),
}


def scipy_quantile(marginal, z):
    """F^-1(Phi(z)) by scipy, from the survival side above the median."""
    return np.where(z < 0, marginal.ppf(special.ndtr(z)), marginal.isf(special.ndtr(-z)))


@pytest.mark.parametrize("name", MARGINALS)
def test_matches_scipy_to_1e12(name):
    """Within |z| <= 6 (all but 2e-9 of the draws) against scipy's ppf / isf."""
    marginal = MARGINALS[name]
    # scipy's triangular isf is ppf(1 - q), which loses digits above z = 3 (see the test of that tail)
    z = Z[(np.abs(Z) <= 6) & ((Z < 3) | (marginal.dist.name != "triang"))]
    # truncnorm(0, inf) is the half-normal, whose scipy isf stays accurate where truncnorm's steps (z > 5)
    oracle = stats.halfnorm() if name == "truncnormal one-sided" else marginal
    got, expected = quantile_from_normal(marginal, z), scipy_quantile(oracle, z)
    assert got.shape == z.shape and np.all(np.isfinite(got))
    # relative 1e-12, plus a few ulps of the largest quantile where one crosses zero (loc + scale t rounds)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=16 * np.finfo(float).eps * np.abs(expected).max())


@pytest.mark.parametrize("a, b", [(-10.0, 10.0), (-10.0, 11.0), (-11.4, 8.6), (-8.6, 11.4)])
def test_truncation_below_float64_resolution(a, b):
    """Bounds so far out that the truncated mass rounds to 1: the quantile is z itself while every |z| is
    a few sd inside them (the first two), the closed form otherwise; both against scipy (within |z| <= 4,
    where scipy's truncnorm keeps 1e-12 for such bounds)."""
    marginal = stats.truncnorm(a, b, loc=35.0, scale=2.5)
    z = Z[np.abs(Z) <= 4]
    np.testing.assert_allclose(quantile_from_normal(marginal, z), scipy_quantile(marginal, z), rtol=1e-12)


def test_triangular_upper_tail_by_mirror_symmetry():
    """triang(c) at x is 1 - triang(1 - c) at 1 - x: the upper tail from scipy's accurate lower-tail ppf."""
    c, z = 0.3, np.linspace(0.0, 8.2, 500)
    expected = 1.0 - stats.triang(1.0 - c).ppf(special.ndtr(-z))
    np.testing.assert_allclose(quantile_from_normal(stats.triang(c), z), expected, rtol=1e-15)


def test_bounds_hold_and_shape_follows_z():
    marginal = stats.truncnorm(-1.0, 0.5, loc=2.0, scale=1.0)
    x = quantile_from_normal(marginal, Z[:7000].reshape(-1, 7))
    assert x.shape == (1000, 7)
    assert x.min() >= 1.0 and x.max() <= 2.5


def test_a_truncated_family_of_the_space_keeps_its_truncation():
    """A normal truncated by the space (marginals.Truncated, family name 'norm') must not take the normal's
    closed form: its quantiles equal scipy's truncnorm on the same interval."""
    from sensitivity.inputs.marginals import Truncated

    marginal = Truncated(stats.norm(loc=30.0, scale=8.0), 15.0, np.inf)
    z = Z[np.abs(Z) <= 6]
    oracle = stats.truncnorm((15.0 - 30.0) / 8.0, np.inf, loc=30.0, scale=8.0)
    np.testing.assert_allclose(quantile_from_normal(marginal, z), scipy_quantile(oracle, z), rtol=1e-9)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 1001, 4096])
def test_sample_quantiles_equal_numpys(n):
    """Sample quantiles from single-rank partitions against numpy.quantile (linear), bit for bit: any sample
    size, probabilities 0 and 1 and unsorted ones, ties, a constant row, a row with NaN, float64 or float32."""
    from sensitivity.inputs.quantiles import sample_quantiles

    rng = np.random.default_rng(n)
    columns = np.round(rng.normal(size=(6, n)), 1)  # ties
    columns[1] = 2.5
    if n > 1:
        columns[2, n // 2] = np.nan
    for p in ([0.05, 0.25, 0.5, 0.75, 0.95], [1.0, 0.0, 0.5], [0.999, 0.001, 0.3, 0.3]):
        expected = np.quantile(columns, p, axis=1)
        np.testing.assert_array_equal(sample_quantiles(columns.copy(), np.array(p)), expected)
        # float32 rows give numpy's quantiles of their float64 values, interpolated in float64
        single = columns.astype(np.float32)
        got = sample_quantiles(single.copy(), np.array(p))
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, np.quantile(single.astype(np.float64), p, axis=1))


@pytest.mark.parametrize("seed", range(20))
def test_sample_quantiles_of_random_sizes_and_probabilities_equal_numpys(seed):
    """Any plan of partitions and extremes (random sample sizes, up to 12 probabilities with clusters
    and repeats) gives numpy.quantile bit for bit."""
    from sensitivity.inputs.quantiles import sample_quantiles

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    p = rng.choice(np.concatenate([rng.random(6), rng.random(6) ** 8, [0.0, 1.0, 1.0 - 1e-3, 0.5]]),
                   size=int(rng.integers(1, 13)))
    columns = rng.standard_t(3, size=(5, n)).astype(rng.choice([np.float32, np.float64]))
    expected = np.quantile(columns.astype(np.float64), p, axis=1)
    np.testing.assert_array_equal(sample_quantiles(columns, p), expected)
