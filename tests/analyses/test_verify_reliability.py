"""The simulator in a reliability analysis's failure region, against closed forms: a linear limit state of normal
inputs whose surrogate is off by a constant ``b``, so the simulator's index at the surrogate's design point and its
Pf are known exactly."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.reliability.sampling import ImportanceSettings
from sensitivity.analyses.verify.reliability import ReliabilityEvents, verify_reliability
from sensitivity.errors import ConfigError

A = np.array([1.0, -2.0, 0.5])
MU = np.array([0.5, -0.5, 1.0])
SD = np.array([1.0, 0.5, 2.0])
S = float(np.sqrt(np.sum((A * SD) ** 2)))
THRESHOLDS = (float(A @ MU + 2.5 * S), float(A @ MU + 3.5 * S))


def simulator(x: np.ndarray) -> np.ndarray:
    return (x @ A)[:, None]


def events(offset: float) -> ReliabilityEvents:
    """The surrogate ``a . x + offset``'s FORM result, in closed form: ``beta = (T - a . mu - b) / s``."""
    beta = (np.array(THRESHOLDS) - A @ MU - offset) / S
    alpha = A * SD / S
    return ReliabilityEvents(np.array([0]), THRESHOLDS, "above", (beta[:, None] * alpha)[:, None, :],
                             beta[:, None], np.full((2, 1), 1.0 / S), ImportanceSettings(n_samples=20_000))


def to_physical(u: np.ndarray) -> np.ndarray:
    return MU + SD * u


@pytest.mark.parametrize("offset, changes", [(0.0, [0, 0]), (0.5 * S, [1, 1])])
def test_a_constant_surrogate_error_changes_pf_by_the_closed_form(offset, changes):
    ds = verify_reliability(simulator, lambda x: simulator(x) + offset, to_physical, events(offset),
                            failure_runs=400, safe_runs=400, seed=2)
    exact = stats.norm.sf((np.array(THRESHOLDS) - A @ MU) / S)
    np.testing.assert_allclose(ds["reliability_design_error"].values[:, 0], offset, atol=1e-12)
    np.testing.assert_allclose(ds["reliability_design_beta_simulator"].values[:, 0], [2.5, 3.5], rtol=1e-12)
    pf, se = ds["reliability_pf_simulator"].values, ds["reliability_pf_simulator_se"].values
    assert np.all(np.abs(pf - exact) <= 3 * se), (pf, exact, se)
    biased = stats.norm.sf((np.array(THRESHOLDS) - A @ MU - offset) / S)
    assert np.all(np.abs(ds["reliability_pf_surrogate"].values - biased) <= 3 * ds["reliability_pf_surrogate_se"])
    np.testing.assert_array_equal(ds["reliability_changes"].values, changes)
    assert int(ds["reliability_verdict"]) == (not any(changes))
    if offset == 0:
        np.testing.assert_array_equal(ds["reliability_pf_change"].values, 0.0)
        np.testing.assert_array_equal(ds["reliability_sign_agreement"].values, 1.0)
    else:
        assert np.all(ds["reliability_sign_agreement"].values < 1.0)
    assert int(ds["reliability_runs"]) == 2 * (1 + 800)


def test_too_few_runs_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="`failure_runs` must be an integer >= 2, got 1"):
        verify_reliability(simulator, simulator, to_physical, events(0.0), failure_runs=1)
