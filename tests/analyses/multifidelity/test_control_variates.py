"""Control-variate mean, variance and covariance against a linear model's closed forms, with a biased surrogate."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.multifidelity import (ControlVariate, estimate_covariance, estimate_mean,
                                                estimate_variance)
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import linear

WEIGHTS = np.array([[1.0, 2.0, -0.5], [0.5, -1.0, 1.5]])
OFFSET = np.array([1.0, -2.0])
EXACT = {"mean": OFFSET, "variance": np.diag(WEIGHTS @ WEIGHTS.T), "covariance": WEIGHTS @ WEIGHTS.T}
N_SIM, N_SUR = 100, 4000
VERBS = {"mean": estimate_mean, "variance": estimate_variance, "covariance": estimate_covariance}


def draw(seed: int, error: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Simulator (the linear model) on the first ``N_SIM`` points, the biased surrogate on all ``N_SUR``."""
    x = np.random.default_rng(seed).standard_normal((N_SUR, 3))
    exact = linear(x, WEIGHTS, OFFSET)
    smooth = 0.4 + 0.3 * np.sin(x[:, :1]) + 0.15 * x[:, 1:2] ** 2  # a smooth, mean-shifting error
    return exact[:N_SIM], exact + error * smooth * np.array([1.0, -0.7])


@pytest.fixture(scope="module")
def runs() -> dict[str, list]:
    """Every estimator with formula intervals on 50 independent seeds."""
    return {q: [verb(*draw(seed)) for seed in range(50)] for q, verb in VERBS.items()}


@pytest.mark.parametrize("quantity", list(VERBS))
def test_estimates_are_unbiased_where_the_surrogate_alone_is_not(runs, quantity):
    est = np.stack([r.estimate for r in runs[quantity]])
    sur = np.stack([r.surrogate_only for r in runs[quantity]])
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    assert (np.abs(est.mean(axis=0) - EXACT[quantity]) < 3 * se).all()
    assert (np.abs(sur.mean(axis=0) - EXACT[quantity]) > 3 * se).any()


@pytest.mark.parametrize("quantity", list(VERBS))
def test_formula_intervals_cover_at_about_their_level(runs, quantity):
    inside = [(r.interval[..., 0] <= EXACT[quantity]) & (EXACT[quantity] <= r.interval[..., 1]) for r in runs[quantity]]
    assert 0.86 <= np.mean(inside) <= 1.0


@pytest.mark.parametrize("quantity", list(VERBS))
def test_formula_standard_error_matches_the_spread_over_seeds(runs, quantity):
    est = np.stack([r.estimate for r in runs[quantity]])
    predicted = np.mean([r.standard_error for r in runs[quantity]], axis=0)
    # the sd of 50 draws is known to ~10 %, the plug-in moments to a few %
    np.testing.assert_allclose(predicted, est.std(axis=0, ddof=1), rtol=0.35)


def test_bias_is_the_mean_of_sim_minus_sur_on_the_shared_points(runs):
    sim, sur = draw(0)
    r = runs["mean"][0]
    np.testing.assert_allclose(r.bias, (sim - sur[:N_SIM]).mean(axis=0))
    np.testing.assert_allclose(r.bias_standard_error, (sim - sur[:N_SIM]).std(axis=0, ddof=1) / np.sqrt(N_SIM))
    assert (np.abs(r.bias) > 3 * r.bias_standard_error).all()


def test_variance_reduction_is_one_minus_rho_squared_times_the_share_of_surrogate_only_rows():
    """The spread of the mean over 300 seeds against 1 - rho^2 (N - n)/N and against the reported ratio."""
    reps = [estimate_mean(*draw(seed)) for seed in range(300)]
    est, alone = np.stack([r.estimate for r in reps]), np.stack([r.simulator_only for r in reps])
    rho = np.mean([r.correlation for r in reps], axis=0)
    measured = est.var(axis=0, ddof=1) / alone.var(axis=0, ddof=1)
    closed = 1 - rho**2 * (N_SUR - N_SIM) / N_SUR
    # log of a ratio of two sample variances of 300 correlated draws: sd below sqrt(4/299) ~ 0.12
    np.testing.assert_allclose(np.log(measured), np.log(closed), atol=0.35)
    np.testing.assert_allclose(np.mean([r.variance_ratio for r in reps], axis=0), closed, rtol=0.05)
    assert (measured < 0.3).all()


@pytest.mark.parametrize("quantity", list(VERBS))
def test_a_perfect_surrogate_gives_the_surrogates_own_estimate(quantity):
    sim, sur = draw(3, error=0.0)
    r = VERBS[quantity](sim, sur)
    np.testing.assert_allclose(r.alpha, 1.0, rtol=1e-12)
    np.testing.assert_allclose(r.estimate, r.surrogate_only, rtol=1e-12, atol=1e-12)


def test_bootstrap_intervals_cover_and_agree_with_the_formula():
    settings = ControlVariate(interval="bootstrap", n_resamples=100)
    inside, ratio = [], []
    for seed in range(20):
        sim, sur = draw(seed)
        boot, formula = estimate_variance(sim, sur, settings, seed=seed), estimate_variance(sim, sur)
        np.testing.assert_allclose(boot.estimate, formula.estimate)
        inside.append((boot.interval[:, 0] <= EXACT["variance"]) & (EXACT["variance"] <= boot.interval[:, 1]))
        ratio.append(boot.standard_error / formula.standard_error)
    assert np.mean(inside) >= 0.8
    assert 0.7 < np.mean(ratio) < 1.3
    again = estimate_variance(*draw(0), settings, seed=0)
    np.testing.assert_array_equal(again.interval, estimate_variance(*draw(0), settings, seed=0).interval)


def test_without_surrogate_only_rows_the_estimate_is_the_simulators():
    sim, sur = draw(1)
    r = estimate_mean(sim, sur[:N_SIM])
    np.testing.assert_array_equal(r.alpha, 0.0)
    np.testing.assert_allclose(r.estimate, sim.mean(axis=0))


def test_bad_inputs_are_refused_with_one_line_naming_them():
    sim, sur = draw(0)
    with pytest.raises(DataError, match="`sur` must have at least the 100 rows"):
        estimate_mean(sim, sur[:50])
    with pytest.raises(DataError, match="`sur` must have the 2 outputs"):
        estimate_mean(sim, sur[:, :1])
    with pytest.raises(DataError, match="`sim` must be finite, row 4"):
        estimate_mean(np.where(np.arange(N_SIM)[:, None] == 4, np.nan, sim), sur)
    with pytest.raises(ConfigError, match="`interval` must be one of"):
        estimate_mean(sim, sur, ControlVariate(interval="student"))
    with pytest.raises(ConfigError, match="`level` must be in"):
        estimate_mean(sim, sur, ControlVariate(level=95))
