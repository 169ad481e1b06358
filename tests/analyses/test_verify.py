"""Verification checks (sensitivity.analyses.verify): the surrogate's error at an analysis's points against the
analysis's own uncertainty, checked on models where the answer is known."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.indices import sobol
from sensitivity.analyses.verify import (VerifyPlan, gaussian_log_likelihood, refine, verify_calibration,
                                        verify_posterior, verify_sobol)
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import ishigami, uniform_space

A = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, 2.0], [1.0, 1.0]])


def linear(points: np.ndarray) -> np.ndarray:
    return points @ A.T


@pytest.mark.parametrize("bias, holds", [(0.01, True), (1.0, False)])
def test_calibration_shift_is_the_refit_a_biased_linear_surrogate_makes(bias, holds):
    sigma = 0.1
    x_true = np.array([0.3, -0.2])
    y = linear(x_true[None])[0]
    obs = ObservationModel.from_arrays(y, sigma=sigma)
    surrogate = lambda p: linear(p) + bias * np.array([1.0, -1.0, 0.5, 0.0])  # noqa: E731
    # the surrogate's best fit, and the simulator's: a linear least-squares problem each
    best = np.linalg.lstsq(A, y - (surrogate(np.zeros((1, 2)))[0]), rcond=None)[0]
    se = sigma * np.sqrt(np.diag(np.linalg.inv(A.T @ A)))
    ds = verify_calibration(linear, surrogate, A, best[None], se, obs)
    # a fit to the simulator's outputs from the surrogate's best fit lands on the truth: the shift is truth - best
    np.testing.assert_allclose(best + ds["calibration_estimate_shift"].values, x_true, atol=1e-10)
    assert int(ds["calibration_verdict"]) == holds
    np.testing.assert_allclose(ds["calibration_surrogate_error"].values[0],
                               surrogate(best[None])[0] - linear(best[None])[0])


def test_posterior_of_an_exact_surrogate_is_not_moved_and_of_a_biased_one_is():
    rng = np.random.default_rng(0)
    obs = ObservationModel.from_arrays(linear(np.array([[0.3, -0.2]]))[0], sigma=0.1)
    draws = rng.normal([0.3, -0.2], 0.05, size=(200, 2))
    mcse = np.full(2, 0.05 / np.sqrt(200))
    exact = verify_posterior(linear, gaussian_log_likelihood(linear(draws), obs), draws, mcse, obs, surrogate=linear)
    np.testing.assert_allclose(exact["posterior_weight"].values, 1 / 200)
    np.testing.assert_allclose(exact["posterior_mean_shift"].values, 0.0, atol=1e-12)
    assert int(exact["posterior_verdict"]) == 1 and float(exact["posterior_importance_ess"]) == pytest.approx(1.0)
    biased = lambda p: linear(p) + 0.05  # noqa: E731
    moved = verify_posterior(linear, gaussian_log_likelihood(biased(draws), obs), draws, mcse, obs, surrogate=biased)
    assert int(moved["posterior_verdict"]) == 0 and float(moved["posterior_importance_ess"]) < 1.0


def test_emulator_likelihood_adds_the_spread_to_the_noise():
    obs = ObservationModel.from_arrays(np.zeros(4), sigma=0.5)
    values = np.full((1, 4), 1.0)
    spread = np.full((1, 4), 0.75)
    expected = -0.5 * (4 * 1.0 / (0.25 + 0.75) + 4 * np.log(1.0))
    assert gaussian_log_likelihood(values, obs, spread)[0] - gaussian_log_likelihood(
        np.zeros((1, 4)), obs, spread)[0] == pytest.approx(expected)


def test_sobol_indices_of_the_simulator_on_the_rows_and_the_surrogates_error():
    space = uniform_space(3, -np.pi, np.pi)
    rows = sobol.sample(space, 256, seed=1, replicates=1)
    half = {key: np.full((3, 1), 0.05) for key in ("S1", "ST")}
    same = verify_sobol(ishigami, ishigami, rows, space, half)
    assert int(same["sobol_verdict"]) == 1
    np.testing.assert_allclose(same["sobol_S1_error"].values, 0.0, atol=1e-12)
    # a surrogate that drops the x3 interaction: ST of x3 falls to ~0 (true 0.244), far outside the half-width
    poor = lambda x: (np.sin(x[:, 0]) + 7.0 * np.sin(x[:, 1]) ** 2)[:, None]  # noqa: E731
    worse = verify_sobol(ishigami, poor, rows, space, half)
    assert int(worse["sobol_verdict"]) == 0
    assert float(worse["sobol_ST_error"].values[2, 0]) < -0.15
    assert float(worse["sobol_ST_error_ratio"].values[2, 0]) > 1.0


def test_plan_subsets_and_refusals():
    plan = VerifyPlan(draws=4, sobol_rows=2)
    draws = np.arange(20.0).reshape(10, 2)
    np.testing.assert_array_equal(plan.posterior_subset(draws)[[0, -1]], draws[[0, -1]])
    assert len(plan.posterior_subset(draws)) == 4
    assert len(plan.design_rows(np.zeros((40, 3)), 3)) == 10
    with pytest.raises(ConfigError, match="sobol_rows"):
        plan.design_rows(np.zeros((5, 3)), 3)
    with pytest.raises(DataError, match="at least 2"):
        plan.posterior_subset(draws[:1])
    with pytest.raises(ConfigError, match="`draws`"):
        VerifyPlan(draws=1)
    with pytest.raises(ConfigError):
        VerifyPlan(sobol_rows=3)


def bootstrap_polynomials(x: np.ndarray, y: np.ndarray, members: int = 5, degree: int = 4):
    """An ensemble of polynomial fits on bootstrap resamples of 1-D samples: ``[P, 1] -> [K, P, 1]``."""
    rng = np.random.default_rng(len(x))
    fits = []
    for _ in range(members):
        take = rng.integers(0, len(x), len(x))
        fits.append(np.polynomial.Polynomial.fit(x[take, 0], y[take, 0], degree))
    return lambda p: np.stack([f(p[:, 0])[:, None] for f in fits])


def test_refinement_adds_runs_where_the_members_disagree_and_reduces_the_error_on_the_analysis_points():
    simulate = lambda p: np.sin(3 * p[:, :1])  # noqa: E731
    x = np.linspace(0.0, 0.6, 12)[:, None]  # no runs where the analysis looks
    candidates = np.linspace(0.7, 1.0, 16)[:, None]
    truth = simulate(candidates)
    check = lambda members: np.abs(members(candidates).mean(axis=0) - truth).max() < 0.01  # noqa: E731
    ds = refine(simulate, bootstrap_polynomials, check, x, simulate(x), candidates, rounds=4, points_per_round=2)
    error = ds["refine_error_rms"].values
    assert int(ds["refine_verdict"][0]) == 0 and int(ds["refine_verdict"][-1]) == 1
    assert ds.attrs["refine_outcome"] == "holds" and error[-1] < 0.1 * error[0]
    np.testing.assert_array_equal(ds["refine_training_size"].values, 12 + 2 * np.arange(ds.sizes["round"]))
    # the first round's runs are the candidates where the members disagreed most: the far end, beyond the data
    assert ds["refine_added"].values[:2].min() > 0.9
    # a budget that cannot be met ends with the rounds spent, every round recorded
    spent = refine(simulate, bootstrap_polynomials, lambda members: False, x, simulate(x), candidates, rounds=2,
                   points_per_round=1)
    assert spent.sizes["round"] == 3 and spent.attrs["refine_outcome"] == "budget spent"
    with pytest.raises(ConfigError, match="points_per_round"):
        refine(simulate, bootstrap_polynomials, check, x, simulate(x), candidates, rounds=1, points_per_round=0)
