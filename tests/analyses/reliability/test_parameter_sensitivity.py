"""Sensitivities of FORM's beta and Pf to the distribution parameters: against FORM rerun with each parameter
moved (central differences of beta), and against OpenTURNS' FORM sensitivities (test-only oracle)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.reliability import form
from sensitivity.analyses.reliability.parameter_sensitivity import (beta_sensitivity, distribution_parameters,
                                                                     pf_sensitivity)
from sensitivity.analyses.reliability.standard_space import Nataf
from sensitivity.inputs.space import ParameterSpace

CORRELATION = [[1.0, 0.3, 0.0], [0.3, 1.0, 0.4], [0.0, 0.4, 1.0]]


def _records(moved=None):
    records = [{"name": "a", "units": "m", "distribution": {"kind": "gumbel_r", "loc": 10.0, "scale": 2.0}},
               {"name": "b", "units": "m", "distribution": {"kind": "lognormal", "median": float(np.e),
                                                              "sigma_log": 0.25}},
               {"name": "c", "units": "1", "low": 1.0, "high": 3.0, "distribution": {"kind": "uniform"}}]
    if moved is not None:
        (i, key), value = moved
        (records[i] if key in ("low", "high") else records[i]["distribution"])[key] = value
    return records


def _g(x):
    a, b, c = x.T
    return 11.0 * b / c - 0.35 * a, np.stack([np.full_like(a, -0.35), 11.0 / c, -11.0 * b / c**2], axis=1)


def _form(space, correlation=CORRELATION):
    nataf = Nataf(tuple(p.frozen_distribution() for p in space.parameters), np.asarray(correlation))
    return nataf, form(nataf.pull_back(_g), np.zeros((1, len(space.parameters))))


def test_beta_sensitivity_matches_form_rerun_with_each_parameter_moved():
    """Gumbel loc/scale, lognormal median/sigma_log, uniform low/high under a correlated Gaussian copula: d beta
    / d theta at the design point against central differences (step 1 % of theta) of beta from FORM rerun."""
    space = ParameterSpace.from_records(_records(), CORRELATION)
    nataf, result = _form(space)
    theta = distribution_parameters(space)
    assert [q.name for q in theta] == ["a.loc", "a.scale", "b.median", "b.sigma_log", "c.low", "c.high"]
    assert [q.units for q in theta] == ["m", "m", "m", "1", "1", "1"]
    ours = beta_sensitivity(result, nataf, space, theta)[0, 0]
    for k, q in enumerate(theta):
        h = 1e-2 * abs(q.value)
        beta = [_form(ParameterSpace.from_records(_records(((q.input, q.key), q.value + s * h)), CORRELATION))[1]
                .beta[0] for s in (1.0, -1.0)]
        assert ours[k] == pytest.approx((beta[0] - beta[1]) / (2 * h), rel=2e-3), q.name
    dpf = pf_sensitivity(result, beta_sensitivity(result, nataf, space, theta))
    np.testing.assert_allclose(dpf[0], -stats.norm.pdf(result.beta[0]) * ours, rtol=1e-12)


def test_beta_and_pf_sensitivities_match_openturns():
    """R ~ N(10, 1.5), S lognormal (median e, sigma_log 0.25), normal-score correlation 0.3, failure R - 2 S < 0:
    OpenTURNS' Hasofer index and event probability sensitivities (mu, sigma; muLog, sigmaLog, with
    d / d median = d / d muLog / median)."""
    ot = pytest.importorskip("openturns")
    correlation = [[1.0, 0.3], [0.3, 1.0]]
    space = ParameterSpace.from_records([
        {"name": "r", "units": "kN", "distribution": {"kind": "normal", "mean": 10.0, "std": 1.5}},
        {"name": "s", "units": "kN", "distribution": {"kind": "lognormal", "median": float(np.e), "sigma_log": 0.25}}],
        correlation)
    nataf = Nataf(tuple(p.frozen_distribution() for p in space.parameters), np.asarray(correlation))
    linear = lambda x: (x[:, 0] - 2.0 * x[:, 1], np.broadcast_to([1.0, -2.0], x.shape))  # noqa: E731
    result = form(nataf.pull_back(linear), np.zeros((1, 2)))
    theta = distribution_parameters(space)
    dbeta = beta_sensitivity(result, nataf, space, theta)
    ours = np.array([dbeta[0, 0], pf_sensitivity(result, dbeta)[0]])

    joint = getattr(ot, "JointDistribution", None) or ot.ComposedDistribution
    distribution = joint([ot.Normal(10.0, 1.5), ot.LogNormal(1.0, 0.25, 0.0)],
                         ot.NormalCopula(ot.CorrelationMatrix(correlation)))
    event = ot.ThresholdEvent(ot.CompositeRandomVector(ot.SymbolicFunction(["r", "s"], ["r - 2 * s"]),
                                                       ot.RandomVector(distribution)), ot.Less(), 0.0)
    solver = ot.SQP()
    for setter in ("setMaximumAbsoluteError", "setMaximumRelativeError", "setMaximumResidualError",
                   "setMaximumConstraintError"):
        getattr(solver, setter)(1e-12)
    algorithm = ot.FORM(solver, event, distribution.getMean())
    algorithm.run()
    theirs = []
    for sensitivity in (algorithm.getResult().getHasoferReliabilityIndexSensitivity(),
                        algorithm.getResult().getEventProbabilitySensitivity()):
        (mu, sigma), (mu_log, sigma_log, _) = list(sensitivity[0]), list(sensitivity[1])
        theirs.append([mu, sigma, mu_log / np.e, sigma_log])
    assert result.beta[0] == pytest.approx(algorithm.getResult().getHasoferReliabilityIndex(), rel=1e-6)
    np.testing.assert_allclose(ours, np.array(theirs), rtol=1e-4)
