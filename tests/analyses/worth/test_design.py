"""The greedy design against brute-force enumeration of every k-subset of candidates (direct inversion)."""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from sensitivity.analyses.worth import DesignSettings, fosm, next_most_important
from tests.helpers.linear_gaussian import forecast_variance, posterior, random_problem

CRITERIA = ["variance", "d_optimal", "a_optimal"]


def criterion(p, rows, name):
    """The criterion with candidate rows added, by direct inversion."""
    post = posterior(np.vstack([p.jacobian, p.candidates[list(rows)]]), p.prior,
                     np.append(p.noise, p.candidate_noise[list(rows)]))
    return {"variance": forecast_variance(post, p.forecasts)[1], "d_optimal": np.linalg.slogdet(post)[1],
            "a_optimal": np.trace(post)}[name]


@pytest.fixture(scope="module")
def case():
    p = random_problem(31, n_obs=4, n_par=5, n_cand=12)
    return p, fosm(p.jacobian, p.prior, p.noise, p.forecasts)


@pytest.mark.parametrize("name", CRITERIA)
def test_greedy_equals_brute_force_for_one_and_is_within_the_bound_for_two_and_three(case, name):
    p, problem = case
    base = criterion(p, [], name)
    for k in (1, 2, 3):
        design = next_most_important(problem, p.candidates, p.candidate_noise,
                                     DesignSettings(criterion=name, k=k, forecast="forecast_1"))
        values = {rows: criterion(p, rows, name) for rows in combinations(range(12), k)}
        best = min(values, key=values.get)
        greedy = criterion(p, design.chosen_index, name)
        # the design's own record of its last step is the recomputed criterion
        recorded = {"variance": design.variance[-1, 1], "d_optimal": design.log_det[-1], "a_optimal": design.trace[-1]}
        np.testing.assert_allclose(recorded[name], greedy, rtol=1e-10)
        if k == 1:
            assert design.chosen_index.tolist() == list(best)
        # the (1 - 1/e) bound on the reduction is a theorem for ln det (monotone submodular), an empirical check for
        # the other two; on this problem greedy finds the optimum outright except for the variance at k = 2, where
        # it chooses {0, 6} against the best {6, 8} and gets 99.8 % of the best reduction
        assert base - greedy >= (1 - 1 / np.e) * (base - values[best])
        if name != "variance":
            assert sorted(design.chosen_index.tolist()) == list(best)

def test_each_step_is_the_best_given_the_steps_before(case):
    """Sequential, not one-shot: step t's choice minimises the criterion given steps 1..t-1 (checked from scratch)."""
    p, problem = case
    design = next_most_important(problem, p.candidates, p.candidate_noise,
                                 DesignSettings(criterion="variance", k=4, forecast="forecast_1"))
    chosen = design.chosen_index.tolist()
    for t in range(4):
        others = [c for c in range(12) if c not in chosen[:t]]
        scores = {c: criterion(p, chosen[:t] + [c], "variance") for c in others}
        assert chosen[t] == min(scores, key=scores.get)
        np.testing.assert_allclose(design.variance[t, 1], scores[chosen[t]], rtol=1e-10)
