"""A Gaussian (e.g. calibration posterior) kept inside the bounds: exact truncated-normal marginals, copula joint."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.inputs.uncertainty import truncated_gaussian_inputs
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace


def box(low: list[float], high: list[float]) -> ParameterSpace:
    return ParameterSpace.from_records([{"name": f"p{i}", "units": "m", "low": lo, "high": hi}
                                        for i, (lo, hi) in enumerate(zip(low, high))])


COV = np.array([[1.0, 0.6, -0.2], [0.6, 2.0, 0.3], [-0.2, 0.3, 0.5]])
MEAN = np.array([0.5, -1.0, 2.0])


def test_far_bounds_give_the_gaussian_itself():
    inputs = truncated_gaussian_inputs(MEAN, COV, box([-1e3] * 3, [1e3] * 3))
    np.testing.assert_allclose(inputs.mean, MEAN, rtol=1e-12)
    np.testing.assert_allclose(inputs.covariance, COV, rtol=1e-8, atol=1e-12)


def test_independent_marginals_are_scipy_truncated_normals_and_samples_stay_inside():
    low, high = np.array([0.0, -2.0, 1.9]), np.array([1.0, 3.0, 5.0])
    cov = np.diag(np.diag(COV))
    inputs = truncated_gaussian_inputs(MEAN, cov, box(low.tolist(), high.tolist()))
    std = np.sqrt(np.diag(cov))
    oracle = [stats.truncnorm((lo - m) / s, (hi - m) / s, loc=m, scale=s) for lo, hi, m, s in zip(low, high, MEAN, std)]
    np.testing.assert_allclose(inputs.mean, [d.mean() for d in oracle], rtol=1e-12)
    np.testing.assert_allclose(inputs.covariance, np.diag([d.var() for d in oracle]), rtol=1e-10, atol=1e-14)
    x = inputs.sample(4096, seed=0)
    assert not inputs.outside_bounds(x).any()


def test_correlated_samples_stay_inside_and_match_the_exact_moments():
    low, high = [0.0, -2.0, 1.5], [1.0, 0.0, 3.0]
    inputs = truncated_gaussian_inputs(MEAN, COV, box(low, high))
    x = inputs.sample(2**15, seed=1)
    assert not inputs.outside_bounds(x).any()
    np.testing.assert_allclose(x.mean(axis=0), inputs.mean, atol=2e-3)
    np.testing.assert_allclose(np.cov(x.T), inputs.covariance, atol=2e-3)


@pytest.mark.parametrize("mean, cov, message", [
    ([5.0, -1.0, 2.0], COV, "input mean of 'p0' = 5 is outside its bounds"),
    (MEAN, [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "`covariance` must be positive definite"),
    ([0.5, 1.0], COV, "`mean` has 2 entries but the space has 3 parameters"),
])
def test_bad_arguments_raise_one_line_config_errors(mean, cov, message):
    with pytest.raises(ConfigError, match=None) as err:
        truncated_gaussian_inputs(mean, cov, box([-3.0] * 3, [3.0] * 3))
    assert message in str(err.value)


def test_the_truncation_hint_goes_to_the_draws_not_to_the_sigma_points():
    """Truncated inputs keep every Monte Carlo draw inside the bounds; the unscented transform's sigma points,
    at mean +- sqrt(n) std, leave them (here by construction), and truncating cannot bring them in: the summary
    gives a method's remedy only where it applies."""
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, propagate
    from sensitivity.analyses.propagation.verdict import summary_lines

    # six broad normals cut to [0, 1]: nearly uniform (std ~0.29), so mean +- sqrt(6) std reaches past both bounds
    inputs = truncated_gaussian_inputs(np.full(6, 0.5), 100.0 * np.eye(6), box([0.0] * 6, [1.0] * 6))
    ds = propagate(BatchedModel(lambda x: x.sum(axis=1, keepdims=True)), inputs, Propagation(
        methods=("unscented", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=1024, n_replicates=4)), seed=0)
    outside = dict(zip(ds["propagation_method_name"].values, ds["outside_bounds"].values))
    assert outside["unscented"] > 0.01 and outside["monte_carlo"] == 0.0
    lines = [line for _, line in summary_lines(ds, bounds_hint=" HINT") if "outside the parameter bounds" in line]
    assert lines == [f"unscented: {100 * outside['unscented']:.0f}% of model evaluations outside the parameter bounds: "
                     "its sigma points lie beyond them, where the surrogate extrapolates (a smaller propagation.alpha "
                     "keeps them nearer the mean)"]


def test_a_verdict_on_evaluations_mostly_outside_the_bounds_says_it_judges_extrapolation():
    """The same inputs through y = sum x^4: the unscented transform's sigma points, 12 of 13 outside [0, 1], miss
    Monte Carlo's moments; its verdict line says the gap is extrapolation as much as nonlinearity; Monte Carlo's,
    inside the bounds, says nothing of the kind."""
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, propagate
    from sensitivity.analyses.propagation.verdict import summary_lines

    inputs = truncated_gaussian_inputs(np.full(6, 0.5), 100.0 * np.eye(6), box([0.0] * 6, [1.0] * 6))
    ds = propagate(BatchedModel(lambda x: (x**4).sum(axis=1, keepdims=True)), inputs, Propagation(
        methods=("unscented", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=4096, n_replicates=8)), seed=0)
    verdicts = {line.split(" disagrees")[0]: line for _, line in summary_lines(ds) if line.startswith("verdict: ")}
    assert "extrapolation as much as the model's nonlinearity" in verdicts["verdict: unscented"]
    assert "extrapolation" not in verdicts.get("verdict: monte_carlo", "")
