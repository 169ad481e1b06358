"""pyEMU's ``Schur`` as an independent oracle, given the same Jacobian, prior and noise as named in-memory matrices."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from sensitivity.analyses.worth import (DesignSettings, added_importance, fosm, next_most_important,
                                        parameter_contributions, removed_importance)
from tests.helpers.linear_gaussian import random_problem

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # pyemu warns about its optional flopy-based legacy module
    pyemu = pytest.importorskip("pyemu")

RTOL = 1e-10
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # inside pyEMU, with pandas 3
PARS = [f"p{i}" for i in range(5)]
OBS = [f"o{i}" for i in range(12)]
CANDS = [f"c{i}" for i in range(9)]
FORES = ["f0", "f1", "f2"]


@pytest.fixture(scope="module")
def case():
    """The problem in both worlds: ours on arrays, pyEMU's ``Schur`` over existing + candidate rows."""
    p = random_problem(21)
    ours = fosm(p.jacobian, p.prior, p.noise, p.forecasts, parameter_names=PARS, observation_names=OBS,
                forecast_names=FORES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schur = pyemu.Schur(jco=pyemu.Jco(x=np.vstack([p.jacobian, p.candidates]), row_names=OBS + CANDS,
                                          col_names=PARS),
                            parcov=pyemu.Cov(x=p.prior, names=PARS),
                            obscov=pyemu.Cov(x=np.concatenate([p.noise, p.candidate_noise])[:, None],
                                             names=OBS + CANDS, isdiagonal=True),
                            forecasts=pyemu.Matrix(x=p.forecasts, row_names=PARS, col_names=FORES), verbose=False)
    return p, ours, schur, schur.get(obs_names=OBS)


def test_posterior_forecast_variance(case):
    _, ours, _, base = case
    np.testing.assert_allclose(ours.posterior_variance, [base.posterior_forecast[f] for f in FORES], rtol=RTOL)
    np.testing.assert_allclose(ours.prior_variance, [base.prior_forecast[f] for f in FORES], rtol=RTOL)
    np.testing.assert_allclose(ours.posterior_covariance, base.posterior_parameter.x, rtol=RTOL)


def test_parameter_and_group_contributions(case):
    _, ours, _, base = case
    groups = {"a": ["p0", "p2"], "b": ["p1", "p3", "p4"]}
    for spec, labels in [(None, PARS), (groups, ["a", "b"])]:
        result = parameter_contributions(ours, spec)
        frame = base.get_par_contribution({k: list(v) for k, v in (groups.items() if spec else
                                                                   ((q, [q]) for q in PARS))},
                                          include_prior_results=True)
        np.testing.assert_allclose(result.posterior_variance, frame.xs("post", level=1, axis=1).loc[labels, FORES],
                                   rtol=RTOL)
        np.testing.assert_allclose(result.prior_variance, frame.xs("prior", level=1, axis=1).loc[labels, FORES],
                                   rtol=RTOL)


def test_removed_observation_importance(case):
    _, ours, _, base = case
    result = removed_importance(ours)
    frame = base.get_removed_obs_importance({o: [o] for o in OBS})
    np.testing.assert_allclose(result.variance, frame.loc[OBS, FORES], rtol=RTOL)
    np.testing.assert_allclose(result.base_variance, frame.loc["base", FORES], rtol=RTOL)
    # the worth is computed directly; pyEMU's is the difference of its two variances (exact here to ~1e-13)
    np.testing.assert_allclose(result.worth, frame.loc[OBS, FORES] - frame.loc["base", FORES], rtol=1e-8)


def test_added_observation_importance(case):
    p, ours, schur, _ = case
    groups = {"g1": ["c0", "c5"], "g2": ["c2", "c3", "c8"]}
    result = added_importance(ours, p.candidates, p.candidate_noise, candidate_names=CANDS)
    frame = schur.get_added_obs_importance({c: [c] for c in CANDS}, base_obslist=list(OBS), reset_zero_weight=0.0)
    np.testing.assert_allclose(result.variance, frame.loc[CANDS, FORES], rtol=RTOL)
    np.testing.assert_allclose(result.base_variance, frame.loc["base", FORES], rtol=RTOL)
    grouped = added_importance(ours, p.candidates, p.candidate_noise, candidate_names=CANDS, groups=groups)
    frame = schur.get_added_obs_importance({k: list(v) for k, v in groups.items()}, base_obslist=list(OBS),
                                           reset_zero_weight=0.0)
    np.testing.assert_allclose(grouped.variance, frame.loc[["g1", "g2"], FORES], rtol=RTOL)


@pytest.mark.parametrize("forecast", FORES)
def test_next_most_important_added_obs(case, forecast):
    p, ours, schur, _ = case
    design = next_most_important(ours, p.candidates, p.candidate_noise, DesignSettings(k=4, forecast=forecast),
                                 candidate_names=CANDS)
    frame = schur.next_most_important_added_obs(forecast=forecast, niter=4, obslist_dict={c: [c] for c in CANDS},
                                                base_obslist=list(OBS), reset_zero_weight=0.0)
    assert list(design.chosen) == list(frame["best_obs"])
    column = FORES.index(forecast)
    np.testing.assert_allclose(design.variance[:, column], frame[f"{forecast}_variance"], rtol=RTOL)
    np.testing.assert_allclose(100 * design.reduction_from_previous[:, column], frame["unc_reduce_iter_base"],
                               rtol=1e-8)
    np.testing.assert_allclose(100 * design.reduction_from_base[:, column], frame["unc_reduce_initial_base"],
                               rtol=1e-8)


def test_correlated_noise_posterior_and_removed_groups():
    """A full noise covariance: removing a group drops its block of ``C_e`` in pyEMU's ``get`` and here."""
    p = random_problem(22)
    g = np.random.default_rng(220).normal(size=(12, 12))
    noise = g @ g.T / 12 + 0.5 * np.eye(12)
    # without a control file pyEMU's base is the union of the groups' observations: let them cover every one
    groups = {"a": ["o0", "o1", "o7"], "b": ["o3", "o4"], "rest": ["o2", "o5", "o6", "o8", "o9", "o10", "o11"]}
    ours = fosm(p.jacobian, p.prior, noise, p.forecasts, parameter_names=PARS, observation_names=OBS,
                forecast_names=FORES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schur = pyemu.Schur(jco=pyemu.Jco(x=p.jacobian, row_names=OBS, col_names=PARS),
                            parcov=pyemu.Cov(x=p.prior, names=PARS), obscov=pyemu.Cov(x=noise, names=OBS),
                            forecasts=pyemu.Matrix(x=p.forecasts, row_names=PARS, col_names=FORES), verbose=False)
        frame = schur.get_removed_obs_importance({k: list(v) for k, v in groups.items()})
    np.testing.assert_allclose(ours.posterior_variance, [schur.posterior_forecast[f] for f in FORES], rtol=RTOL)
    result = removed_importance(ours, groups)
    np.testing.assert_allclose(result.variance, frame.loc[list(groups), FORES], rtol=RTOL)
    np.testing.assert_allclose(result.worth, frame.loc[list(groups), FORES] - frame.loc["base", FORES], rtol=1e-8)
