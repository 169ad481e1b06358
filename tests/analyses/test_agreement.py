"""The one rule of "agrees" and of a check's power (sensitivity.analyses.agreement), against the normal power
function (scipy as oracle), and verify and multifidelity judging one surrogate/simulator pair alike."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.agreement import (FAILS, HOLDS, INCONCLUSIVE, INDEX_TOLERANCE, Power, agrees, outcome,
                                            overall, runs_needed)
from sensitivity.errors import ConfigError
from tests.helpers.functions import ishigami, ishigami_indices, uniform_space


def detection_probability(difference: float, se: float, level: float) -> float:
    """P(|d + e| > z se), e ~ N(0, se^2): the two-sided test's power (Cohen 1988, ch. 12)."""
    z = stats.norm.isf((1 - level) / 2)
    return float(stats.norm.sf(z - difference / se) + stats.norm.cdf(-z - difference / se))


@pytest.mark.parametrize("power", [0.5, 0.8, 0.9])
def test_at_the_needed_se_a_factor_2_error_is_detected_with_the_stated_power(power):
    judge = Power(0.95, power)
    q = 3e-4
    se = float(judge.needed_se(q))
    assert detection_probability(q / 2, se, 0.95) == pytest.approx(power, abs=0.01)
    assert outcome(0.0, se * 0.999, q, power=judge) == HOLDS and outcome(0.0, se * 1.001, q, power=judge) == INCONCLUSIVE


def test_runs_needed_scale_as_the_square_of_the_standard_errors_ratio():
    judge = Power()
    q, runs = 1e-3, 128
    se = 4 * float(judge.needed_se(q))
    assert runs_needed(se, q, runs, power=judge) == 16 * runs
    # a binomial proportion's se at that many runs meets the target: sqrt(p (1 - p) / n) with p = 0.3
    p = 0.3
    se_now = np.sqrt(p * (1 - p) / runs)
    n = int(runs_needed(se_now, 0.1, runs, power=judge))
    assert np.sqrt(p * (1 - p) / n) <= judge.needed_se(0.1) < np.sqrt(p * (1 - p) / (n - 1))


def test_the_tolerance_bounds_what_matters_and_what_fails():
    # a 1e-4 difference of a negligible index: within the tolerance, not a failure; a factor 2 of 0 is the tolerance
    assert agrees(1e-4, 1e-6, INDEX_TOLERANCE) and not agrees(0.02, 1e-6, INDEX_TOLERANCE)
    assert outcome(1e-4, 1e-3, 0.0, INDEX_TOLERANCE) == HOLDS
    assert outcome(0.02, 1e-3, 0.0, INDEX_TOLERANCE) == FAILS
    assert outcome(np.nan, 1e-3, 0.5) == FAILS and outcome(0.0, np.nan, 0.5) == INCONCLUSIVE
    assert [overall(v) for v in ([1, 2, 1], [1, 0, 2], [1, 1], [])] == [INCONCLUSIVE, FAILS, HOLDS, HOLDS]


def test_bad_power_is_one_line():
    with pytest.raises(ConfigError, match="`power` must be a number in \\(0, 1\\), got 1.0"):
        Power(power=1.0)


def test_verify_and_multifidelity_judge_one_pair_alike():
    """Ishigami and a surrogate biased in x0 (``+ 0.8 sin x2 + 0.5 x0``: its S1 of x0 about 0.47 against the exact
    0.31) fail both verify's Sobol' check and the multifidelity study, on S1 of x0, by the same rule; Ishigami
    against itself plus ``1e-4 x2`` (a difference of ~1e-6 in negligible indices) fails neither."""
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.indices import sobol
    from sensitivity.analyses.multifidelity import MultifidelityStudy, multifidelity, summary
    from sensitivity.analyses.verify import verify_sobol

    space = uniform_space(3, -np.pi, np.pi)
    exact = ishigami_indices()
    rows = sobol.sample(space, 512, seed=1, replicates=1)
    half = {k: np.full((3, 1), 0.005) for k in ("S1", "ST")}
    study = MultifidelityStudy(budget=500, pilot=50, surrogate_rows=2048, n_resamples=100, cost_ratio=1e4)

    def biased(x: np.ndarray) -> np.ndarray:
        return ishigami(x) + 0.8 * np.sin(x[:, 2:3]) + 0.5 * x[:, :1]

    def nudged(x: np.ndarray) -> np.ndarray:
        return ishigami(x) + 1e-4 * x[:, 2:3]

    for surrogate, fails in ((biased, True), (nudged, False)):
        checked = verify_sobol(ishigami, surrogate, rows, space, half)
        ds = multifidelity(BatchedModel(values=surrogate), space, study, simulator=lambda x, stage: ishigami(x), seed=1)
        assert (int(checked["sobol_verdict"]) == FAILS) == fails
        assert (ds.attrs["verdict"] == "bias significant") == fails
        assert bool(checked["sobol_S1_flag"].values[0, 0]) == fails == bool(ds["S1_bias_significant"].values[0, 0])
        assert ("S1 of x0" in summary(ds).verdicts[0].statement) == fails
        low, high = ds["S1_interval"].values[0, 0]
        assert low <= exact["S1"][0] <= high  # the anchored index holds the exact one either way
