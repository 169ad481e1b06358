"""Observation worth against recomputation from scratch with the rows added or removed."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.worth import added_importance, fosm, removed_importance
from tests.helpers.linear_gaussian import exact_removed_worth, forecast_variance, posterior, random_problem


def test_removed_observations_match_recomputation_without_their_rows():
    p = random_problem(6)
    problem = fosm(p.jacobian, p.prior, p.noise, p.forecasts)
    result = removed_importance(problem)
    for i in range(12):
        keep = np.delete(np.arange(12), i)
        post = posterior(p.jacobian[keep], p.prior, p.noise[keep])
        np.testing.assert_allclose(result.variance[i], forecast_variance(post, p.forecasts), rtol=1e-11)
        np.testing.assert_allclose(result.log_det[i], np.linalg.slogdet(post)[1], rtol=1e-11)
        np.testing.assert_allclose(result.trace[i], np.trace(post), rtol=1e-11)
    np.testing.assert_allclose(result.worth, result.variance - problem.posterior_variance, atol=1e-15)
    assert result.kind == "removed" and np.all(result.worth >= 0)


def test_removed_groups_with_correlated_noise_drop_their_block_of_the_noise():
    p = random_problem(7)
    rng = np.random.default_rng(70)
    g = rng.normal(size=(12, 12))
    noise = g @ g.T / 12 + 0.5 * np.eye(12)
    groups = {"a": [0, 1, 2], "b": ["obs_5", "obs_11"], "all": list(range(12))}
    result = removed_importance(fosm(p.jacobian, p.prior, noise, p.forecasts), groups)
    for row, removed in enumerate([[0, 1, 2], [5, 11]]):
        keep = np.setdiff1d(np.arange(12), removed)
        post = posterior(p.jacobian[keep], p.prior, noise[np.ix_(keep, keep)])
        np.testing.assert_allclose(result.variance[row], forecast_variance(post, p.forecasts), rtol=1e-11)
    np.testing.assert_allclose(result.variance[2], forecast_variance(p.prior, p.forecasts), rtol=1e-12)


def demo_like(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """70 observed days of an epidemic-like curve, six parameters with prior variances from 8e-8 to 2e2 (those of
    the SEIR demo's space), smooth overlapping sensitivities: the data pin the forecasts down (worth / variance
    down to 4e-8; 5e-7 in the demo)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, 71) / 70.0
    centres, widths = rng.uniform(0.2, 0.8, 6), rng.uniform(0.1, 0.4, 6)
    sd = np.sqrt(np.array([1.3e-2, 1.3, 0.75, 8.2e-8, 2.1e2, 4.1e-2]))
    jacobian = 10.0 * np.exp(-((t[:, None] - centres) / widths) ** 2) * (t[:, None] - centres) / sd
    noise = 1e-2 * rng.uniform(0.5, 2.0, 70) ** 2
    forecasts = 20.0 * rng.normal(size=(6, 3)) / sd[:, None]
    short = [a.astype(np.float32).astype(float) for a in (jacobian, np.diag(sd**2), noise, forecasts)]
    return tuple(short)  # 24-bit mantissas: the exact oracle's fractions stay short (the same problem to 6e-8)


@pytest.mark.parametrize("case", ["demo_like", "3x2_a", "3x2_b", "3x2_c"])
def test_removal_worth_equals_the_exact_difference_of_the_two_variances(case):
    """Against the two variances computed and subtracted in exact rational arithmetic: 1e-9 relative, where the
    difference of the two float64 variances loses log10(variance / worth) digits (1.3e-8 on demo_like; 1e-5 to
    8e-5 on the 3x2 problems, whose third observation is worth 3e-10 to 4e-12 of the variance)."""
    if case == "demo_like":
        jacobian, prior, noise, forecasts = demo_like(2)
    else:
        jacobian = np.random.default_rng({"3x2_a": 1, "3x2_b": 2, "3x2_c": 3}[case]).normal(size=(3, 2))
        jacobian[2] *= 1e-4
        prior, noise, forecasts = np.eye(2), np.array([1e-4, 1e-4, 1.0]), np.ones((2, 1))
    exact = exact_removed_worth(jacobian, prior, noise, forecasts)
    result = removed_importance(fosm(jacobian, prior, noise, forecasts))
    np.testing.assert_allclose(result.worth, exact, rtol=1e-9, atol=0)


def test_removal_worth_of_groups_with_correlated_noise_equals_the_exact_difference():
    p = random_problem(7)
    g = np.random.default_rng(71).normal(size=(12, 12))
    noise = g @ g.T / 12 + 0.5 * np.eye(12)
    groups = [[0, 1, 2], [5, 11], [4]]
    result = removed_importance(fosm(p.jacobian, p.prior, noise, p.forecasts), {str(i): m for i, m in
                                                                                  enumerate(groups)})
    np.testing.assert_allclose(result.worth, exact_removed_worth(p.jacobian, p.prior, noise, p.forecasts, groups),
                               rtol=1e-9, atol=0)


def test_added_candidates_match_recomputation_with_their_rows_and_the_rank_one_formula():
    p = random_problem(8)
    problem = fosm(p.jacobian, p.prior, p.noise, p.forecasts)
    result = added_importance(problem, p.candidates, p.candidate_noise)
    post = posterior(p.jacobian, p.prior, p.noise)
    for c in range(9):
        new = posterior(np.vstack([p.jacobian, p.candidates[c]]), p.prior, np.append(p.noise, p.candidate_noise[c]))
        np.testing.assert_allclose(result.variance[c], forecast_variance(new, p.forecasts), rtol=1e-11)
        np.testing.assert_allclose(result.log_det[c], np.linalg.slogdet(new)[1], rtol=1e-11)
        np.testing.assert_allclose(result.trace[c], np.trace(new), rtol=1e-11)
        j = p.candidates[c]
        rank_one = forecast_variance(post, p.forecasts) - (p.forecasts.T @ post @ j) ** 2 / (
            j @ post @ j + p.candidate_noise[c])
        np.testing.assert_allclose(result.variance[c], rank_one, rtol=1e-11)
    assert result.kind == "added" and np.all(result.worth >= 0)


def test_added_groups_match_recomputation_with_all_their_rows():
    p = random_problem(9)
    groups = {"pair": ["cand_0", "cand_4"], "three": [1, 2, 3], "one": 8}
    result = added_importance(fosm(p.jacobian, p.prior, p.noise, p.forecasts), p.candidates, p.candidate_noise,
                              groups=groups)
    for row, added in enumerate([[0, 4], [1, 2, 3], [8]]):
        new = posterior(np.vstack([p.jacobian, p.candidates[added]]), p.prior,
                        np.append(p.noise, p.candidate_noise[added]))
        np.testing.assert_allclose(result.variance[row], forecast_variance(new, p.forecasts), rtol=1e-11)
        np.testing.assert_allclose(result.log_det[row], np.linalg.slogdet(new)[1], rtol=1e-11)
        np.testing.assert_allclose(result.trace[row], np.trace(new), rtol=1e-11)
    assert result.group_names == ("pair", "three", "one")


def test_candidates_added_to_no_data_start_from_the_prior():
    p = random_problem(10)
    result = added_importance(fosm(np.zeros((0, 5)), p.prior, np.zeros(0), p.forecasts), p.candidates, 0.5)
    for c in range(9):
        new = posterior(p.candidates[c:c + 1], p.prior, np.array([0.5]))
        np.testing.assert_allclose(result.variance[c], forecast_variance(new, p.forecasts), rtol=1e-11)
    np.testing.assert_allclose(result.base_variance, forecast_variance(p.prior, p.forecasts), rtol=1e-13)


def test_removal_in_batches_of_one_gives_the_same_answer(monkeypatch):
    p = random_problem(11)
    problem = fosm(p.jacobian, p.prior, p.noise, p.forecasts)
    whole = removed_importance(problem)
    monkeypatch.setattr("sensitivity.analyses.worth.data_worth.BATCH_BYTES", 1)
    np.testing.assert_array_equal(removed_importance(problem).variance, whole.variance)
