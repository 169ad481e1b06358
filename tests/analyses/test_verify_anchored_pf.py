"""Multifidelity failure probabilities on a reliability analysis's proposal: a linear limit state of standard
normal inputs, ``y = (x1 + x2) / sqrt(2)`` above ``T = 3`` (exact ``Pf = Phi(-3)``), with a surrogate biased by
``+0.3`` (its ``Pf = Phi(-2.7)``, 2.6x too large) whose design point sets the proposal."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.verify.anchored_pf import MFReliability, failure_probabilities
from sensitivity.analyses.reliability.sampling import ImportanceSettings
from sensitivity.analyses.verify.reliability import ReliabilityEvents
from sensitivity.errors import ConfigError

T, BIAS = 3.0, 0.3


def simulator(x: np.ndarray) -> np.ndarray:
    return (x[:, :1] + x[:, 1:2]) / np.sqrt(2.0)


def biased(x: np.ndarray) -> np.ndarray:
    return simulator(x) + BIAS


def _events(beta: float) -> ReliabilityEvents:
    """The surrogate's event: its design point ``beta (1, 1) / sqrt(2)`` in u (= x), d beta / d T = 1."""
    design = np.full((1, 1, 2), beta / np.sqrt(2.0))
    return ReliabilityEvents(np.array([0]), (T,), "above", design, np.array([[beta]]), np.array([[1.0]]),
                             ImportanceSettings(n_samples=2000))


def _run(surrogate, beta: float, seed: int, settings: MFReliability = MFReliability()):
    return failure_probabilities(simulator, surrogate, lambda u: u, _events(beta), settings, seed=seed)


def test_the_anchored_pf_covers_the_simulators_exact_pf_over_seeds_where_the_biased_surrogates_does_not():
    exact = stats.norm.sf(T)
    covered = {"simulator": 0, "surrogate": 0}
    seeds = 200
    fixed = MFReliability(max_runs=128)  # the pilot alone: the estimator's own coverage, no top-up
    for seed in range(seeds):
        ds = _run(biased, T - BIAS, seed, fixed)
        for who in covered:
            low, high = ds[f"reliability_pf_{who}_interval"].values[0]
            covered[who] += int(low <= exact <= high)
    assert 0.9 <= covered["simulator"] / seeds <= 0.99, covered  # a 95 % interval
    assert covered["surrogate"] == 0, covered
    np.testing.assert_allclose(float(ds["reliability_pf_surrogate"][0]), stats.norm.sf(T - BIAS), rtol=0.15)
    assert int(ds["reliability_runs"]) == 1 + 64 + 64 and ds["reliability_pf_simulator_interval"].dims == (
        "reliability_event", "bound")


def test_a_perfect_surrogate_gives_its_own_pf():
    ds = _run(simulator, T, seed=3)
    assert float(ds["reliability_pf_simulator"][0]) == float(ds["reliability_pf_surrogate"][0])
    np.testing.assert_allclose(ds["reliability_pf_simulator_interval"].values,
                               ds["reliability_pf_surrogate_interval"].values)
    assert int(ds["reliability_verdict"]) == 1


@pytest.mark.parametrize("settings, message", [
    (MFReliability(failure_runs=1), "`failure_runs` must be an integer >= 2, got 1"),
    (MFReliability(safe_runs=2.5), "`safe_runs` must be an integer >= 2, got 2.5"),
    (MFReliability(level=1.0), "`level` must be in \\(0, 1\\), got 1.0"),
    (MFReliability(max_runs=100), "`max_runs` must be an integer >= 128, got 100"),
])
def test_bad_settings_are_one_line(settings, message):
    with pytest.raises(ConfigError, match=message):
        _run(biased, T - BIAS, 0, settings)
