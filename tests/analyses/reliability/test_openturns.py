"""FORM on mixed marginals under a correlated Gaussian copula against OpenTURNS (test-only oracle)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.reliability import FormSettings, form, nataf, sphere_starts
from sensitivity.analyses.reliability.form import CONVERGED

ot = pytest.importorskip("openturns")

CORRELATION = np.array([[1.0, 0.3, 0.0, -0.2], [0.3, 1.0, 0.4, 0.0], [0.0, 0.4, 1.0, 0.1], [-0.2, 0.0, 0.1, 1.0]])
FORMULA = "2.2 * x2 * x4 / x3 - 0.35 * x1"


def g_x(x):
    x1, x2, x3, x4 = x.T
    grad = np.stack([np.full_like(x1, -0.35), 2.2 * x4 / x3, -2.2 * x2 * x4 / x3**2, 2.2 * x2 / x3], axis=1)
    return 2.2 * x2 * x4 / x3 - 0.35 * x1, grad


def openturns_form():
    marginals = [ot.Gumbel(2.0, 10.0), ot.LogNormal(1.0, 0.25, 0.0), ot.Uniform(1.0, 3.0),
                 ot.TruncatedNormal(5.0, 2.0, 2.0, 12.0)]
    joint = getattr(ot, "JointDistribution", None) or ot.ComposedDistribution
    distribution = joint(marginals, ot.NormalCopula(ot.CorrelationMatrix(CORRELATION.tolist())))
    function = ot.SymbolicFunction(["x1", "x2", "x3", "x4"], [FORMULA])
    event = ot.ThresholdEvent(ot.CompositeRandomVector(function, ot.RandomVector(distribution)), ot.Less(), 0.0)
    solver = ot.SQP()
    for setter in ("setMaximumAbsoluteError", "setMaximumRelativeError", "setMaximumResidualError",
                   "setMaximumConstraintError"):
        getattr(solver, setter)(1e-12)
    solver.setMaximumIterationNumber(1000)
    algorithm = ot.FORM(solver, event, distribution.getMean())  # 1.27 logs that this argument is deprecated
    algorithm.run()
    return algorithm.getResult()


def test_form_matches_openturns_on_mixed_correlated_inputs():
    space = nataf([stats.gumbel_r(loc=10.0, scale=2.0), stats.lognorm(0.25, scale=np.exp(1.0)),
                   stats.uniform(1.0, 2.0), stats.truncnorm(-1.5, 3.5, loc=5.0, scale=2.0)], CORRELATION)
    ours = form(space.pull_back(g_x), sphere_starts(4, 5, radius=0.5, seed=0))
    theirs = openturns_form()
    beta = theirs.getHasoferReliabilityIndex()
    assert 1.5 < beta < 4.5
    assert ours.n_points[0] == 1
    assert ours.beta[0] == pytest.approx(beta, abs=1e-4)
    x_star = space.to_physical(ours.design_u[0, :1])[0]
    np.testing.assert_allclose(x_star, np.array(theirs.getPhysicalSpaceDesignPoint()), rtol=1e-4)
    assert ours.pf[0] == pytest.approx(theirs.getEventProbability(), rel=1e-3)


@pytest.mark.parametrize("quasi_newton", [True, False])
def test_form_from_the_origin_converges_at_tolerance_1e_8_and_matches_openturns(quasi_newton):
    """At 1e-8 the merit function's decrease (the squared off-normal distance, ~1e-16) is below the rounding of
    ``g``: the Armijo test used to reject every step and the start hit ``max_iterations``. The residual-halving
    local phase converges both the iHL-RF and the quasi-Newton step, to OpenTURNS' SQP design point."""
    space = nataf([stats.gumbel_r(loc=10.0, scale=2.0), stats.lognorm(0.25, scale=np.exp(1.0)),
                   stats.uniform(1.0, 2.0), stats.truncnorm(-1.5, 3.5, loc=5.0, scale=2.0)], CORRELATION)
    ours = form(space.pull_back(g_x), np.zeros((1, 4)), FormSettings(tolerance=1e-8, quasi_newton=quasi_newton))
    theirs = openturns_form()
    assert ours.start_status[0, 0] == CONVERGED
    assert ours.start_iterations[0, 0] < 50
    assert ours.beta[0] == pytest.approx(theirs.getHasoferReliabilityIndex(), abs=1e-8)
    x_star = space.to_physical(ours.design_u[0, :1])[0]
    np.testing.assert_allclose(x_star, np.array(theirs.getPhysicalSpaceDesignPoint()), rtol=1e-7)
    assert ours.pf[0] == pytest.approx(theirs.getEventProbability(), rel=1e-6)
