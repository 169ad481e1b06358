"""Verification checks (sensitivity.analyses.verify): the surrogate's error at an analysis's points against the
analysis's own uncertainty, checked on models where the answer is known."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.indices import sobol
from sensitivity.analyses.verify import (VerdictSettings, VerifyPlan, gaussian_log_likelihood, refine,
                                        verify_calibration, verify_posterior, verify_sobol)
from sensitivity.analyses.verify.verdict import ERROR, RANKING, causes
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
    # fewer candidates than the budget would add: it stops when every one was run, and says so
    few = refine(simulate, bootstrap_polynomials, lambda members: False, x, simulate(x), candidates[:3], rounds=5,
                 points_per_round=2)
    assert few.sizes["round"] == 3 and few.attrs["refine_outcome"] == "candidates exhausted"
    with pytest.raises(ConfigError, match="points_per_round"):
        refine(simulate, bootstrap_polynomials, check, x, simulate(x), candidates, rounds=1, points_per_round=0)


#: Weights of a linear model of 10 uniform inputs: ST_i = a_i^2 / sum a^2 (0.60 for x0, 6e-5 for x9).
WEIGHTS = np.array([3.0, 2.0, 1.0, 0.5, 0.5, 0.3, 0.3, 0.2, 0.2, 0.03])


def weighted(weights: np.ndarray):
    return lambda x: (x @ weights)[:, None]


def linear_indices(weights: np.ndarray) -> np.ndarray:
    """``[d]`` the closed-form ST (= S1) of ``x @ weights`` with independent uniform inputs."""
    return weights**2 / (weights**2).sum()


def test_an_index_of_nearly_zero_with_a_tiny_error_passes_and_a_large_one_off_by_half_widths_fails():
    space = uniform_space(10, 0.0, 1.0)
    rows = sobol.sample(space, 256, seed=3, replicates=1)
    # half-widths as a long design of a linear model gives them: ~2 % of each index, tight around ~0 ones
    half = {key: 0.02 * linear_indices(WEIGHTS)[:, None] for key in ("S1", "ST")}
    tiny = WEIGHTS.copy()
    tiny[9] *= 2.0  # ST of x9: 6e-5 -> 2.4e-4, an error of ~2e-4: tens of half-widths, but no conclusion changes
    expected = linear_indices(tiny)[9] - linear_indices(WEIGHTS)[9]
    ds = verify_sobol(weighted(WEIGHTS), weighted(tiny), rows, space, half)
    np.testing.assert_allclose(float(ds["sobol_ST_error"].values[9, 0]), expected, rtol=0.3)
    assert float(ds["sobol_ST_error_ratio"].values[9, 0]) > 10  # today's rule alone would fail it
    assert int(ds["sobol_verdict"]) == 1 and not ds["sobol_ST_flag"].values.any()
    # the error rule alone, without an absolute tolerance, is today's verdict: it fails
    strict = verify_sobol(weighted(WEIGHTS), weighted(tiny), rows, space, half,
                          settings=VerdictSettings(index_tolerance=0.0, flag_on="error"))
    assert int(strict["sobol_verdict"]) == 0 and strict["sobol_ST_flag"].values[9, 0] == ERROR
    # x0's weight 3 -> 3.6: ST 0.60 -> ~0.68, several half-widths (0.015) and above the tolerance
    large = WEIGHTS.copy()
    large[0] = 3.6
    ds = verify_sobol(weighted(WEIGHTS), weighted(large), rows, space, half)
    error = float(ds["sobol_ST_error"].values[0, 0])
    assert error == pytest.approx(linear_indices(large)[0] - linear_indices(WEIGHTS)[0], abs=0.02)
    assert error > 3 * half["ST"][0, 0] and int(ds["sobol_verdict"]) == 0
    assert ds["sobol_ST_flag"].values[0, 0] & ERROR and causes(ds["sobol_ST_flag"].values) == ["error"]


def test_a_swap_of_two_influential_inputs_is_flagged_as_a_ranking_change_and_a_crossing_as_a_threshold():
    space = uniform_space(10, 0.0, 1.0)
    rows = sobol.sample(space, 256, seed=3, replicates=1)
    half = {key: np.full((10, 1), 0.1) for key in ("S1", "ST")}  # a gap of 0.33 is resolved, one of 0.05 is not
    swapped = WEIGHTS[[1, 0, *range(2, 10)]]  # x0 and x1 exchange their influence (0.60 <-> 0.27)
    ds = verify_sobol(weighted(WEIGHTS), weighted(swapped), rows, space, half,
                      settings=VerdictSettings(flag_on="conclusion"))
    assert int(ds["sobol_verdict"]) == 0
    np.testing.assert_array_equal(np.flatnonzero(ds["sobol_ST_flag"].values[:, 0] & RANKING), [0, 1])
    assert causes(ds["sobol_ST_flag"].values) == ["ranking"]
    # x2 (ST 0.067) falls below an importance threshold of 0.05 in a surrogate that halves its weight (0.017)
    lower = WEIGHTS.copy()
    lower[2] = 0.5
    ds = verify_sobol(weighted(WEIGHTS), weighted(lower), rows, space, half,
                      settings=VerdictSettings(importance=0.05, flag_on="conclusion"))
    assert int(ds["sobol_verdict"]) == 0 and causes(ds["sobol_ST_flag"].values) == ["threshold"]
    np.testing.assert_array_equal(np.flatnonzero(ds["sobol_ST_flag"].values[:, 0]), [2])


def test_a_verdict_never_holds_on_non_finite_values():
    space = uniform_space(3, -np.pi, np.pi)
    rows = sobol.sample(space, 64, seed=1, replicates=1)
    half = {key: np.full((3, 1), 0.5) for key in ("S1", "ST")}
    broken = lambda x: np.full((len(x), 1), np.nan)  # noqa: E731
    ds = verify_sobol(ishigami, broken, rows, space, half)
    assert int(ds["sobol_verdict"]) == 0 and (ds["sobol_ST_flag"].values & ERROR).all()
    obs = ObservationModel.from_arrays(linear(np.array([[0.3, -0.2]]))[0], sigma=0.1)
    nan_surrogate = lambda p: np.full((len(p), 4), np.nan)  # noqa: E731
    ds = verify_calibration(linear, nan_surrogate, A, np.array([[0.3, -0.2]]), np.ones(2), obs)
    assert int(ds["calibration_verdict"]) == 0


def test_a_shift_below_the_absolute_floor_is_not_flagged_though_it_exceeds_a_tiny_standard_error():
    obs = ObservationModel.from_arrays(linear(np.array([[0.3, -0.2]]))[0], sigma=0.1)
    surrogate = lambda p: linear(p) + 1e-4  # noqa: E731 (a shift of ~1e-4 in each parameter)
    best = np.array([[0.3, -0.2]])
    se = np.full(2, 1e-6)  # a parameter identified far better than anyone reports it
    bare = verify_calibration(linear, surrogate, A, best, se, obs)
    assert int(bare["calibration_verdict"]) == 0 and (bare["calibration_shift_ratio"].values > 10).all()
    floor = VerdictSettings().shift_floor(np.array([[-1.0, 1.0], [-1.0, 1.0]]))
    np.testing.assert_allclose(floor, 0.002)  # 0.001 of the range 2
    floored = verify_calibration(linear, surrogate, A, best, se, obs, floor=floor)
    assert int(floored["calibration_verdict"]) == 1 and not floored["calibration_flag"].values.any()
    np.testing.assert_allclose(floored["calibration_shift_floor"].values, 0.002)
    with pytest.raises(ConfigError, match="`index_tolerance` must be a number in"):
        VerdictSettings(index_tolerance=-0.1)
    with pytest.raises(ConfigError, match="`flag_on`"):
        VerdictSettings(flag_on="never")


def test_the_worst_indices_list_the_flagged_ones_first_and_mark_only_them():
    """An index tens of half-widths off but within the tolerance is shown as not flagged; flagged ones come first."""
    from sensitivity.analyses.verify.summary import summary

    space = uniform_space(10, 0.0, 1.0)
    rows = sobol.sample(space, 256, seed=3, replicates=1)
    half = {key: 0.02 * linear_indices(WEIGHTS)[:, None] for key in ("S1", "ST")}
    names = ("parameter", [f"x{i}" for i in range(10)])  # as verify.nc has them

    def shown(biased):
        ds = verify_sobol(weighted(WEIGHTS), weighted(biased), rows, space, half).assign_coords(parameter_name=names)
        (verdict,) = summary(ds).verdicts
        return ds, [(row[0].text, float(row[2].text), row[3].text, row[3].flag) for row in verdict.worst.rows]

    tiny = WEIGHTS.copy()
    tiny[9] *= 2.0  # ST of x9: tens of half-widths, ~2e-4 in index units: within the tolerance
    ds, table = shown(tiny)
    assert int(ds["sobol_verdict"]) == 1 and table[0][1] > 10
    assert all(flag == "" for *_, flag in table)  # nothing marked bad in a verdict that holds
    assert ("no: within the tolerance", "") in [row[2:] for row in table if row[0] == "ST of x9"]
    large = tiny.copy()
    large[0] = 3.6  # ST of x0: several half-widths and above the tolerance
    ds, table = shown(large)
    flags = np.concatenate([ds["sobol_S1_flag"].values.ravel(), ds["sobol_ST_flag"].values.ravel()])
    marked = [row for row in table if row[3]]
    assert int(ds["sobol_verdict"]) == 0 and len(marked) == min(5, int((flags > 0).sum()))
    assert table[:len(marked)] == marked and all(row[2] == "error" for row in marked)
