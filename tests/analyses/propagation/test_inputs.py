"""Input distributions for propagation: copula marginals, correlations, Gaussian inputs, bad inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sensitivity.inputs.uncertainty import gaussian_inputs, inputs_from_space, pearson_under_copula, unit_cube_blocks
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace

RECORDS = [
    {"name": "a", "units": "1", "low": 0.0, "high": 2.0},  # uniform
    {"name": "b", "units": "day", "low": -10.0, "high": 10.0, "distribution": {"kind": "normal", "mean": 1.0, "std": 2.0}},
    {"name": "c", "units": "day-1", "low": 0.0, "high": 1.0,
     "distribution": {"kind": "truncnormal", "mean": 0.3, "std": 0.4}},
    {"name": "d", "units": "1", "low": 0.01, "high": 100.0,
     "distribution": {"kind": "lognormal", "median": 1.0, "sigma_log": 0.5}},
    {"name": "e", "units": "m", "low": 1.0, "high": 4.0, "distribution": {"kind": "triangular", "mode": 1.5}},
]
CORRELATION = np.array([
    [1.0, 0.5, 0.0, 0.3, 0.0],
    [0.5, 1.0, -0.4, 0.0, 0.2],
    [0.0, -0.4, 1.0, 0.0, 0.0],
    [0.3, 0.0, 0.0, 1.0, 0.6],
    [0.0, 0.2, 0.0, 0.6, 1.0],
])


@pytest.fixture(scope="module")
def space() -> ParameterSpace:
    return ParameterSpace.from_records(RECORDS, correlation=CORRELATION)


@pytest.fixture(scope="module")
def copula_sample(space: ParameterSpace) -> np.ndarray:
    return inputs_from_space(space).sample(2**13, seed=7)


def test_copula_sample_has_the_requested_marginals(space, copula_sample):
    # KS against each frozen marginal (scipy as oracle). An iid sample of 8192 would give
    # D ~ 0.01 and pass p > 0.01 99% of the time; the scrambled Sobol sample is more uniform still.
    for j, parameter in enumerate(space.parameters):
        result = stats.kstest(copula_sample[:, j], parameter.frozen_distribution().cdf)
        assert result.pvalue > 0.01, (parameter.name, result)


def test_copula_sample_has_the_gaussian_copula_rank_correlation(copula_sample):
    # Spearman's rho of a Gaussian copula is (6/pi) arcsin(r/2) whatever the marginals
    # (Kruskal 1958). Its sampling sd at N = 8192 is <= 1/sqrt(N) ~ 0.011; 0.035 is ~3 sd.
    rho = stats.spearmanr(copula_sample).statistic
    expected = 6.0 / math.pi * np.arcsin(CORRELATION / 2.0)
    np.testing.assert_allclose(rho, expected, atol=0.035)


def test_pearson_under_copula_matches_closed_forms():
    r = 0.7
    normal = pearson_under_copula([stats.norm(1, 2), stats.norm(-3, 0.5)], np.array([[1, r], [r, 1]]))
    uniform = pearson_under_copula([stats.uniform(0, 1), stats.uniform(2, 5)], np.array([[1, r], [r, 1]]))
    s1, s2 = 0.5, 0.8
    lognormal = pearson_under_copula([stats.lognorm(s=s1), stats.lognorm(s=s2, scale=3.0)],
                                     np.array([[1, r], [r, 1]]))
    assert normal[0, 1] == pytest.approx(r, abs=1e-10)
    assert uniform[0, 1] == pytest.approx(6.0 / math.pi * math.asin(r / 2.0), abs=1e-6)
    lognormal_exact = math.expm1(r * s1 * s2) / math.sqrt(math.expm1(s1**2) * math.expm1(s2**2))
    assert lognormal[0, 1] == pytest.approx(lognormal_exact, abs=1e-8)


def test_space_inputs_moments_match_a_large_sample(space):
    # The quadrature covariance against the sample covariance of 2^16 RQMC points. The sampling sd
    # of a correlation at N = 65536 is <= 1/sqrt(N) = 0.004; 0.015 is ~4 sd, for every entry.
    inputs = inputs_from_space(space)
    x = inputs.sample(2**16, seed=3)
    std = np.sqrt(np.diag(inputs.covariance))
    np.testing.assert_allclose(x.mean(axis=0), inputs.mean, atol=0.015 * std.max())
    np.testing.assert_allclose(np.corrcoef(x.T), inputs.covariance / np.outer(std, std), atol=0.015)
    np.testing.assert_allclose(x.std(axis=0), std, rtol=0.015)


def test_independent_space_has_diagonal_covariance_of_marginal_variances():
    space = ParameterSpace.from_records(RECORDS)
    inputs = inputs_from_space(space)
    expected_var = [(2.0**2) / 12.0, 4.0, stats.truncnorm.var(-0.75, 1.75, 0.3, 0.4),
                    math.expm1(0.25) * math.exp(0.25), (1 + 1.5**2 + 16 - 1.5 - 4 - 6) / 18.0]
    np.testing.assert_allclose(inputs.covariance, np.diag(expected_var), rtol=1e-10)


def test_gaussian_inputs_sample_mean_and_covariance():
    mean, cov = np.array([1.0, -2.0]), np.array([[2.0, 0.6], [0.6, 0.5]])
    x = gaussian_inputs(mean, cov).sample(2**14, seed=1, sampler="random")
    # iid: sd of the mean = sqrt(diag / N) <= 0.011, of a covariance entry ~ sqrt(2) * 2 / sqrt(N) = 0.022
    np.testing.assert_allclose(x.mean(axis=0), mean, atol=0.05)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.09)


def test_sobol_blocks_concatenate_to_one_scrambled_sequence():
    blocks = list(unit_cube_blocks(64, 3, 16, "sobol", np.random.default_rng(5)))
    whole = next(unit_cube_blocks(64, 3, 64, "sobol", np.random.default_rng(5)))
    np.testing.assert_array_equal(np.concatenate(blocks), whole)
    # a balanced (0, m, d) net: each of the 64 intervals [k/64, (k+1)/64) holds one point per axis
    assert all(len(np.unique(np.floor(whole[:, j] * 64))) == 64 for j in range(3))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda s: gaussian_inputs([1.0, 2.0], [[1.0, 2.0], [2.0, 1.0]]), "positive definite"),
        (lambda s: gaussian_inputs([1.0, 2.0], [[1.0, 0.1], [0.2, 1.0]]), "symmetric"),
        (lambda s: gaussian_inputs([1.0, 2.0], [[1.0, 0.0, 0.0]]), "shape"),
        (lambda s: gaussian_inputs([1.0, np.nan], np.eye(2)), "finite"),
        (lambda s: gaussian_inputs([5.0, 0.0, 0.5, 1.0, 2.0], np.eye(5), space=s), "'a' = 5 is outside its bounds"),
        (lambda s: gaussian_inputs([1.0, 0.0], np.eye(2), space=s), "space has 5"),
        (lambda s: gaussian_inputs([1.0, 0.0], np.eye(2), names=["p"]), "`names` must have 2"),
        (lambda s: ParameterSpace.from_records([{**RECORDS[0], "distribution": {"kind": "gamma"}}]), "gamma"),
        (lambda s: inputs_from_space(ParameterSpace.from_records(
            [{**RECORDS[1], "distribution": {"kind": "normal", "mean": 20.0, "std": 1.0}}])), "outside its bounds"),
        (lambda s: inputs_from_space(s).sample(1000), "power of 2"),
        (lambda s: inputs_from_space(s).sample(8, sampler="halton"), "`sampler`"),
    ],
)
def test_bad_inputs_raise_one_line_config_errors(space, make, message):
    with pytest.raises(ConfigError, match=message) as err:
        make(space)
    assert "\n" not in str(err.value)
