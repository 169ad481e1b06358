"""Observation worth against recomputation from scratch with the rows added or removed."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.worth import added_importance, fosm, removed_importance
from tests.helpers.linear_gaussian import forecast_variance, posterior, random_problem


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
