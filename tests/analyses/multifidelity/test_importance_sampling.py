"""Multifidelity importance sampling of a linear limit state's failure probability, Pf = Phi(-beta)."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from sensitivity.analyses.multifidelity import MFImportanceSampling, failure_probability
from sensitivity.errors import ConfigError, DataError

BETA, D = 2.5, 2
DIRECTION = np.ones(D) / math.sqrt(D)
EXACT = NormalDist().cdf(-BETA)
SETTINGS = MFImportanceSampling(n_surrogate=20_000, n_simulator=300)


def simulator(x: np.ndarray) -> np.ndarray:
    return BETA - x @ DIRECTION


def surrogate(x: np.ndarray) -> np.ndarray:
    """The limit state plus a smooth error: it fails about 2.7 times less often than the simulator."""
    return simulator(x) + 0.25 * np.sin(x[:, 0]) + 0.15


def nominal(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((n, D))


def nominal_logpdf(x: np.ndarray) -> np.ndarray:
    return -0.5 * (x**2).sum(axis=1) - 0.5 * D * math.log(2 * math.pi)


@pytest.mark.parametrize("settings", [SETTINGS, MFImportanceSampling(n_surrogate=20_000, n_simulator=300, defensive=0.1)])
def test_the_estimate_is_unbiased_for_the_simulator_and_its_intervals_cover(settings):
    runs = [failure_probability(simulator, surrogate, nominal, nominal_logpdf, settings, seed=s) for s in range(40)]
    pf = np.array([r.probability for r in runs])
    se = pf.std(ddof=1) / math.sqrt(pf.size)
    assert abs(pf.mean() - EXACT) < 3 * se
    assert abs(np.mean([r.surrogate_probability for r in runs]) - EXACT) > 3 * se
    assert np.mean([r.interval[0] <= EXACT <= r.interval[1] for r in runs]) >= 0.85
    # the reported CoV is the spread over seeds, and far below plain MC with the same 300 simulator runs
    assert np.mean([r.coefficient_of_variation for r in runs]) == pytest.approx(pf.std(ddof=1) / EXACT, rel=0.35)
    assert pf.std(ddof=1) / EXACT < 0.3 * math.sqrt((1 - EXACT) / (EXACT * 300))


def test_two_failure_regions_need_a_mixture_of_two_gaussians():
    """``|x . a| >= beta``: Pf = 2 Phi(-beta); one component is centred between the regions, two find both."""
    def two_sided(x):
        return BETA - np.abs(x @ DIRECTION)

    def two_sided_surrogate(x):
        return two_sided(x) + 0.1 * np.cos(x[:, 1])

    settings = MFImportanceSampling(n_surrogate=20_000, n_simulator=400, components=2)
    runs = [failure_probability(two_sided, two_sided_surrogate, nominal, nominal_logpdf, settings, seed=s)
            for s in range(20)]
    pf = np.array([r.probability for r in runs])
    assert abs(pf.mean() - 2 * EXACT) < 3 * pf.std(ddof=1) / math.sqrt(pf.size)
    means = runs[0].biasing.means @ DIRECTION
    assert np.sort(np.sign(means)).tolist() == [-1.0, 1.0]
    assert np.median([r.coefficient_of_variation for r in runs]) < 0.2


def test_results_are_reproducible_from_the_seed():
    a = failure_probability(simulator, surrogate, nominal, nominal_logpdf, SETTINGS, seed=7)
    b = failure_probability(simulator, surrogate, nominal, nominal_logpdf, SETTINGS, seed=7)
    assert a.probability == b.probability
    np.testing.assert_array_equal(a.points, b.points)
    assert a.points.shape == (300, D) and a.failed.sum() == a.n_failures_simulator


def test_bad_settings_and_a_surrogate_that_never_fails_are_refused():
    with pytest.raises(ConfigError, match="`defensive` must be in \\[0, 1\\), got 1.0"):
        failure_probability(simulator, surrogate, nominal, nominal_logpdf, MFImportanceSampling(defensive=1.0))
    with pytest.raises(ConfigError, match="`n_simulator` must be an integer >= 2, got 1"):
        failure_probability(simulator, surrogate, nominal, nominal_logpdf, MFImportanceSampling(n_simulator=1))
    with pytest.raises(DataError, match="the surrogate failed at 0 of 1000 nominal points"):
        failure_probability(simulator, lambda x: simulator(x) + 10, nominal, nominal_logpdf,
                            MFImportanceSampling(n_surrogate=1000), seed=0)
    with pytest.raises(DataError, match="`sur_limit_state` must return \\[1000\\] values"):
        failure_probability(simulator, lambda x: simulator(x)[:5], nominal, nominal_logpdf,
                            MFImportanceSampling(n_surrogate=1000), seed=0)
