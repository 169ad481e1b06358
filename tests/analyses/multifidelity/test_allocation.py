"""The MFMC allocation against Peherstorfer et al.'s closed forms and against a simulated variance."""
from __future__ import annotations

import math

import numpy as np
import pytest

from sensitivity.analyses.multifidelity import Allocation, allocate
from sensitivity.errors import ConfigError, DataError


def pilot(rho: float, n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Paired pilot values whose sample correlation is exactly ``rho``."""
    rng = np.random.default_rng(seed)
    sur, noise = rng.standard_normal((2, n))
    sur -= sur.mean()
    noise -= noise.mean()
    noise -= noise @ sur / (sur @ sur) * sur
    noise *= np.linalg.norm(sur) / np.linalg.norm(noise)
    return (rho * sur + math.sqrt(1 - rho**2) * noise + 3.0)[:, None], sur[:, None]


@pytest.mark.parametrize("rho,w", [(0.95, 100.0), (0.99, 1000.0), (0.8, 20.0)])
def test_allocation_is_theorem_3_4_and_the_variance_ratio_corollary_3_5(rho, w):
    settings = Allocation(budget=10_000.0, cost_sim=1.0, cost_sur=1.0 / w)
    a = allocate(*pilot(rho), settings)
    r = math.sqrt(w * rho**2 / (1 - rho**2))
    assert a.ratio == pytest.approx(r)
    assert a.n_sim == math.floor(settings.budget / (1.0 + r / w))
    assert a.n_sim * settings.cost_sim + a.n_sur * settings.cost_sur <= settings.budget
    assert a.n_sur == pytest.approx(r * a.n_sim, rel=1e-3)
    assert a.variance_ratio[0] == pytest.approx((math.sqrt(1 - rho**2) + rho / math.sqrt(w)) ** 2, rel=2e-3)
    assert a.worthwhile and a.n_mc == 10_000


def test_predicted_variance_reduction_matches_simulated_estimators():
    """MFMC means at the allocation and MC means at the same budget, 400 times each (Gaussian pair, rho = 0.95)."""
    rho, reps = 0.95, 400
    a = allocate(*pilot(rho), Allocation(budget=500.0, cost_sim=1.0, cost_sur=0.01))
    rng = np.random.default_rng(1)
    z = rng.standard_normal((reps, a.n_sur))
    f1 = z
    f0 = rho * z[:, : a.n_sim] + math.sqrt(1 - rho**2) * rng.standard_normal((reps, a.n_sim))
    c0, c1 = f0 - f0.mean(1, keepdims=True), f1[:, : a.n_sim] - f1[:, : a.n_sim].mean(1, keepdims=True)
    alpha = (c0 * c1).sum(1) / (c1 * c1).sum(1)
    mfmc = f0.mean(1) + alpha * (f1.mean(1) - f1[:, : a.n_sim].mean(1))
    mc = rng.standard_normal((reps, a.n_mc)).mean(1)
    measured = mfmc.var(ddof=1) / mc.var(ddof=1)
    assert abs(math.log(measured / a.variance_ratio[0])) < 0.3  # two variances of 400 draws: sd of the log ~ 0.1


def test_an_unhelpful_surrogate_leaves_the_budget_to_the_simulator():
    a = allocate(*pilot(0.3), Allocation(budget=100.0, cost_sim=1.0, cost_sur=0.5))
    assert not a.worthwhile
    assert a.n_sur == a.n_sim == math.floor(100.0 / 1.5)


def test_several_outputs_share_the_least_correlated_ones_allocation():
    (s1, u1), (s2, u2) = pilot(0.99), pilot(0.9, seed=1)
    a = allocate(np.hstack([s1, s2]), np.hstack([u1, u2]), Allocation(budget=1000.0, cost_sim=1.0, cost_sur=0.01))
    np.testing.assert_allclose(a.rho, [0.99, 0.9])
    assert a.rho_design == pytest.approx(0.9)
    assert a.variance_ratio[0] < a.variance_ratio[1] < 1.0


def test_bad_settings_and_pilots_are_refused_with_one_line_naming_them():
    sim, sur = pilot(0.9)
    with pytest.raises(ConfigError, match="`cost_sur` must be a finite number > 0, got -1"):
        allocate(sim, sur, Allocation(budget=10.0, cost_sim=1.0, cost_sur=-1))
    with pytest.raises(ConfigError, match="`criterion` must be one of"):
        allocate(sim, sur, Allocation(budget=10.0, cost_sim=1.0, cost_sur=0.1, criterion="max"))
    with pytest.raises(ConfigError, match="`budget` must pay for at least min_sim=2"):
        allocate(sim, sur, Allocation(budget=1.0, cost_sim=1.0, cost_sur=0.1))
    with pytest.raises(DataError, match="pilot `sur` must have the shape of `sim`"):
        allocate(sim, sur[:10], Allocation(budget=10.0, cost_sim=1.0, cost_sur=0.1))


def test_a_perfect_surrogate_is_worthwhile():
    """|rho| = 1 makes the optimal ratio infinite; the surrogate pays most then (before: inf * 0 = NaN said no)."""
    y = np.random.default_rng(0).normal(size=(20, 2))
    plan = allocate(y, 2 * y + 1, Allocation(budget=1000.0, cost_sim=10.0, cost_sur=0.01))
    assert plan.worthwhile and plan.n_sim == 2 and plan.n_sur > 90_000
