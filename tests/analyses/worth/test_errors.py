"""Bad input: one-line ConfigErrors that name the field and the value."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.worth import (DesignSettings, added_importance, fosm, next_most_important,
                                        parameter_contributions, removed_importance)
from sensitivity.errors import ConfigError
from tests.helpers.linear_gaussian import random_problem


@pytest.fixture(scope="module")
def case():
    p = random_problem(41)
    return p, fosm(p.jacobian, p.prior, p.noise, p.forecasts)


def check(match, call, *args, **kwargs):
    with pytest.raises(ConfigError, match=match) as info:
        call(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_problem_inputs():
    p = random_problem(42)
    singular = p.prior.copy()
    singular[:, 4] = singular[:, 3]
    singular[4, :] = singular[3, :]
    check(r"prior_covariance must be positive definite.*singular", fosm, p.jacobian, singular, p.noise, p.forecasts)
    rank_one = np.outer(np.arange(1.0, 6.0), np.arange(1.0, 6.0))
    check(r"prior_covariance must be positive definite", fosm, p.jacobian, rank_one, p.noise, p.forecasts)
    check(r"prior_covariance must hold positive variances, got 0 at position 2", fosm, p.jacobian,
          np.array([1.0, 1.0, 0.0, 1.0, 1.0]), p.noise, p.forecasts)
    check(r"prior_covariance must be symmetric", fosm, p.jacobian, p.prior + np.triu(np.ones((5, 5)), 1), p.noise,
          p.forecasts)
    check(r"noise must be \[12\] variances or a \[12, 12\] covariance, got shape \(11,\)", fosm, p.jacobian, p.prior,
          p.noise[:11], p.forecasts)
    check(r"noise must be positive definite", fosm, p.jacobian, p.prior, -np.eye(12), p.forecasts)
    check(r"jacobian must be finite", fosm, np.where(p.jacobian > 1, np.nan, p.jacobian), p.prior, p.noise,
          p.forecasts)
    check(r"forecasts must be \[n_par=5, n_fore >= 1\], got shape \(4, 3\)", fosm, p.jacobian, p.prior, p.noise,
          p.forecasts[:4])
    check(r"forecast_names holds 'a' twice", fosm, p.jacobian, p.prior, p.noise, p.forecasts,
          forecast_names=["a", "b", "a"])
    check(r"parameter_names must hold 5 names, got 2", fosm, p.jacobian, p.prior, p.noise, p.forecasts,
          parameter_names=["a", "b"])


def test_groups(case):
    _, problem = case
    check(r"groups group 'g': unknown name 'par_9'", parameter_contributions, problem, {"g": ["par_9"]})
    check(r"groups group 'g': position 7 is out of range 0..4", parameter_contributions, problem, {"g": [7]})
    check(r"groups group 'g' is empty", removed_importance, problem, {"g": []})
    check(r"groups 'all' holds every parameter; at least one must remain uncertain", parameter_contributions,
          problem, {"all": list(range(5))})


def test_candidates(case):
    p, problem = case
    check(r"candidate 'obs_3' is already observed", added_importance, problem, p.candidates, p.candidate_noise,
          candidate_names=["c0", "c1", "c2", "obs_3", "c4", "c5", "c6", "c7", "c8"])
    check(r"candidate_noise must hold positive variances, got -1 at position 0", added_importance, problem,
          p.candidates, -1.0)
    check(r"candidates must be \[n_cand >= 1, n_par=5\], got shape \(9, 4\)", added_importance, problem,
          p.candidates[:, :4], p.candidate_noise)


def test_design_settings(case):
    p, problem = case
    check(r"criterion must be one of \['variance', 'd_optimal', 'a_optimal'\], got 'e_optimal'", DesignSettings,
          criterion="e_optimal")
    check(r"k must be an integer >= 1, got 0", DesignSettings, k=0)
    check(r"k must be an integer >= 1, got 2.5", DesignSettings, k=2.5)
    check(r"forecast 'nope' is not one of the forecasts \['forecast_0', 'forecast_1', 'forecast_2'\]",
          next_most_important, problem, p.candidates, p.candidate_noise, DesignSettings(forecast="nope"))
    check(r"forecast must name one of", next_most_important, problem, p.candidates, p.candidate_noise,
          DesignSettings())
    check(r"k = 10 exceeds the 9 candidate groups", next_most_important, problem, p.candidates, p.candidate_noise,
          DesignSettings(criterion="d_optimal", k=10))
    with pytest.raises(Exception):  # frozen
        DesignSettings().k = 4
