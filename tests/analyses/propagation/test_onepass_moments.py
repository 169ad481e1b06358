"""The Monte Carlo propagation's moments are one-pass already (blocks merged by Chan et al.'s update, replicate by
replicate; one replicate's values held for its quantiles, at most ``max_bytes``): numpy on the same points
(:func:`~sensitivity.analyses.propagation.monte_carlo.sample_points`, evaluated in memory) to 1e-10, and the
closed form of a linear model of Gaussian inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from sensitivity.analyses.propagation import monte_carlo
from sensitivity.analyses.propagation.monte_carlo import replicate_plan, sample_points
from sensitivity.inputs.uncertainty import gaussian_inputs

MEAN = np.array([1.0, -2.0, 0.5])
COVARIANCE = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, -0.4], [0.0, -0.4, 0.5]])
SLOPES = np.array([[2.0, -1.0, 0.5], [0.0, 3.0, 1.0]])
OFFSET = np.array([1e5, -3.0])  # a large mean: the blocks' centring must keep the variance


def linear(x: np.ndarray) -> np.ndarray:
    return OFFSET + x @ SLOPES.T


def curved(x: np.ndarray) -> np.ndarray:
    return np.concatenate([linear(x), np.exp(0.3 * x[:, :1]) * x[:, 1:2]], axis=1)


@pytest.mark.parametrize("sampler", ["sobol", "random"])
def test_streamed_moments_equal_numpy_per_replicate_on_the_same_points(sampler):
    inputs = gaussian_inputs(MEAN, COVARIANCE)
    settings = {"n_samples": 2**12, "n_replicates": 4, "sampler": sampler, "block_size": 128, "max_bytes": 8 * 3 * 512,
                "seed": 6}
    ds = monte_carlo(inputs, curved, quantiles=(0.05, 0.5, 0.95), **settings)
    n_rep, size = replicate_plan(2**12, 4, 3, settings["max_bytes"], power_of_two=sampler == "sobol")
    assert (n_rep, size) == (8, 512)  # the memory cap of one replicate's values split the sample into 8 of 512
    y = curved(sample_points(inputs, 3, **settings))
    reps = y.reshape(n_rep, size, 3)
    np.testing.assert_allclose(ds.output_mean.values, y.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ds.output_covariance.values, np.cov(y.T), rtol=1e-10)
    np.testing.assert_allclose(ds.output_std.values, y.std(axis=0, ddof=1), rtol=1e-10)
    rep_std = reps.std(axis=1, ddof=1)  # [R, m]: each replicate's std, their spread is the std's error
    np.testing.assert_allclose(ds.output_std_se.values, rep_std.std(axis=0, ddof=1) / math.sqrt(n_rep), rtol=1e-10)
    rep_cov = np.stack([np.cov(r.T) for r in reps])
    np.testing.assert_allclose(ds.output_covariance_se.values, rep_cov.std(axis=0, ddof=1) / math.sqrt(n_rep),
                               rtol=1e-9)
    np.testing.assert_allclose(ds.output_quantile.values, np.quantile(reps, [0.05, 0.5, 0.95], axis=1).mean(axis=1),
                               rtol=1e-12)


def test_linear_gaussian_mean_and_std_are_the_closed_form():
    # y = c + A x, x ~ N(mu, S): mean c + A mu, covariance A S A^T, within 5 of the replicates' standard errors
    # (16 replicates: Student t with 15 dof, P(|t| > 5) ~ 1.6e-4 per comparison)
    # and the quantiles mean + std Phi^-1(p) within 5 of theirs
    ds = monte_carlo(gaussian_inputs(MEAN, COVARIANCE), linear, n_samples=2**14, seed=2, quantiles=(0.1, 0.9))
    mean, std = OFFSET + SLOPES @ MEAN, np.sqrt(np.diag(SLOPES @ COVARIANCE @ SLOPES.T))
    assert (np.abs(ds.output_mean.values - mean) <= 5 * ds.output_mean_se.values).all()
    assert (np.abs(ds.output_std.values - std) <= 5 * ds.output_std_se.values).all()
    quantiles = mean + std * special.ndtri(np.array([0.1, 0.9]))[:, None]
    assert (np.abs(ds.output_quantile.values - quantiles) <= 5 * ds.output_quantile_se.values).all()
    # randomised QMC on a linear model: the mean's error far below plain Monte Carlo's std / sqrt(N)
    assert (np.abs(ds.output_mean.values - mean) < 0.1 * std / math.sqrt(2**14)).all()
