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
                            failure_runs=400, safe_runs=400, max_runs=20_000, seed=2)
    exact = stats.norm.sf((np.array(THRESHOLDS) - A @ MU) / S)
    np.testing.assert_allclose(ds["reliability_design_error"].values[:, 0], offset, atol=1e-12)
    np.testing.assert_allclose(ds["reliability_design_beta_simulator"].values[:, 0], [2.5, 3.5], rtol=1e-12)
    pf, se = ds["reliability_pf_simulator"].values, ds["reliability_pf_simulator_se"].values
    assert np.all(np.abs(pf - exact) <= 4 * se), (pf, exact, se)  # a false alarm 6e-5 of the time per value
    biased = stats.norm.sf((np.array(THRESHOLDS) - A @ MU - offset) / S)
    assert np.all(np.abs(ds["reliability_pf_surrogate"].values - biased) <= 4 * ds["reliability_pf_surrogate_se"])
    np.testing.assert_array_equal(ds["reliability_changes"].values, changes)
    # enough runs (up to the whole redrawn sample): an exact surrogate holds, a biased one fails on its pilot
    assert int(ds["reliability_verdict"]) == (0 if any(changes) else 1)
    if offset == 0:
        np.testing.assert_array_equal(ds["reliability_pf_change"].values, 0.0)
        np.testing.assert_array_equal(ds["reliability_sign_agreement"].values, 1.0)
        assert int(ds["reliability_runs"]) == 2 + int(ds["reliability_event_runs"].sum())
    else:
        assert np.all(ds["reliability_sign_agreement"].values < 1.0)
        assert int(ds["reliability_runs"]) == 2 * (1 + 800)  # a pilot that fails is not topped up


def test_an_exact_surrogate_at_pf_2e_4_is_inconclusive_within_4096_runs_and_says_how_many_would_do():
    """Seeing a factor-2 change of Pf takes about ``2 z / Pf`` safe runs (z = 1.96): ~17,000 at Pf = Phi(-3.5),
    ~640 at Phi(-2.5)."""
    ds = verify_reliability(simulator, simulator, to_physical, events(0.0), failure_runs=64, safe_runs=64, seed=2)
    np.testing.assert_array_equal(ds["reliability_event_verdict"].values, [1, 2])
    assert int(ds["reliability_verdict"]) == 2  # the cap of 4096, split between the two strata, each floored:
    assert 4096 - 2 < int(ds["reliability_event_runs"][1]) <= 4096
    needed = float(ds["reliability_runs_needed"][1])
    assert 4096 < needed <= 20_000 and 0.5 < needed * stats.norm.sf(3.5) / (2 * 1.96) < 2, needed
    assert 128 < int(ds["reliability_event_runs"][0]) < 4096  # topped up as far as needed, not to the cap


def four_modes(x: np.ndarray) -> np.ndarray:
    """``max |u_i|`` of two standard normals: failure beyond ``T`` on four half-planes, ``Pf = 1 - (1 - 2
    Phi(-T))^2``."""
    return np.abs(x).max(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(4))
def test_a_surrogate_that_sees_one_mode_of_four_never_holds(seed):
    """The surrogate ``u_1`` sees one of the simulator's four failure modes (Pf 4x too small at Pf ~1e-4); its
    proposal at ``(T, 0)`` seldom reaches the other three, so 64 + 64 runs see no disagreement: the old rule, whose
    ``reliability_changes`` reads 0, said "holds". The check is inconclusive, never holds."""
    t = 3.9
    exact = 1 - (1 - 2 * stats.norm.sf(t)) ** 2
    found = ReliabilityEvents(np.array([0]), (t,), "above", np.array([[[t, 0.0]]]), np.array([[t]]),
                              np.array([[1.0]]), ImportanceSettings(n_samples=20_000))
    assert exact / stats.norm.sf(t) > 3.9
    for max_runs in (128, 4096):
        ds = verify_reliability(four_modes, lambda x: x[:, :1], lambda u: u, found, max_runs=max_runs, seed=seed)
        assert int(ds["reliability_changes"][0]) == 0 if max_runs == 128 else True
        assert int(ds["reliability_verdict"]) != 1, ds["reliability_event_verdict"].values
        assert float(ds["reliability_runs_needed"][0]) > max_runs


def test_an_event_without_a_design_point_is_not_checked_and_says_so():
    """A threshold below the output's whole range: the analysis finds no design point (NaN) and nothing is run
    there; the event is inconclusive and the summary names it as not checked (it used to count as holding)."""
    from sensitivity.analyses.verify.summary import summary

    found = events(0.0)
    beta = found.design_beta.copy()
    beta[0] = np.nan
    found = ReliabilityEvents(found.indices, found.thresholds, "above", found.design_u, beta,
                              found.dbeta_dthreshold, found.importance)
    ds = verify_reliability(simulator, simulator, to_physical, found, max_runs=20_000, seed=0)
    np.testing.assert_array_equal(ds["reliability_event_verdict"].values, [2, 1])
    assert int(ds["reliability_verdict"]) == 2 and int(ds["reliability_event_runs"][0]) == 0
    (verdict,) = summary(ds.assign_attrs(verdict="inconclusive")).verdicts
    assert verdict.inconclusive and "not checked: output 0, threshold" in verdict.statement


def test_too_few_runs_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="`failure_runs` must be an integer >= 2, got 1"):
        verify_reliability(simulator, simulator, to_physical, events(0.0), failure_runs=1)


def test_the_u_function_is_the_members_distance_to_the_limit_state_in_their_sds_and_refinement_runs_its_lowest():
    from sensitivity.analyses.verify import refine
    from sensitivity.analyses.verify.reliability import u_function

    found = events(0.0)
    x = to_physical(np.array([[0.0, 0.0, 0.0], [2.5, 0.0, 0.0], [3.5, 0.0, 0.0]]))
    offsets = np.array([-0.3, 0.0, 0.3])
    members = lambda points: simulator(points)[None] + offsets[:, None, None]  # noqa: E731  [K, P, 1]
    y = simulator(x)[:, 0]
    gaps = np.abs(np.array(THRESHOLDS)[None, :] - y[:, None]).min(axis=1)  # the nearer threshold
    np.testing.assert_allclose(u_function(members(x), found), gaps / 0.3, rtol=1e-12)
    fitted = []
    ds = refine(simulator, lambda xs, ys: fitted.append(len(xs)) or members, lambda m: False, x[:1], simulator(x[:1]),
                x, rounds=1, points_per_round=1, initial=members, priority=lambda v: u_function(v, found))
    lowest = int(np.argmin(gaps))
    np.testing.assert_allclose(ds["refine_added"].values, x[lowest:lowest + 1])


def test_the_events_of_a_series_are_read_in_the_flat_order_output_then_threshold():
    """design_u(threshold, design_point, parameter, day) of 2 thresholds x 3 days: event e = i t + j is day i,
    threshold j."""
    import xarray as xr

    from sensitivity.analyses.reliability import ReliabilitySettings

    t, days, n = 2, 3, 4
    beta = np.arange(t * days, dtype=float).reshape(t, 1, days)  # [threshold, design_point, day] = 3 j + i
    ds = xr.Dataset({"design_u": (("threshold", "design_point", "parameter", "day"),
                                  np.broadcast_to(beta[:, :, None, :], (t, 1, n, days))),
                     "design_beta": (("threshold", "design_point", "day"), beta),
                     "dbeta_dthreshold": (("threshold", "design_point", "day"), -beta)})
    settings = ReliabilitySettings(thresholds=[1.0, 2.0], methods=("form", "importance_sampling"))
    found = ReliabilityEvents.from_dataset(ds, np.array([4, 5, 6]), settings)
    expected = [3 * j + i for i in range(days) for j in range(t)]
    np.testing.assert_array_equal(found.design_beta[:, 0], expected)
    np.testing.assert_array_equal(found.design_u[:, 0, :], np.repeat(np.array(expected, float)[:, None], n, axis=1))
    np.testing.assert_array_equal(found.dbeta_dthreshold[:, 0], -np.array(expected, float))
    assert found.thresholds == (1.0, 2.0) and found.importance == settings.importance
