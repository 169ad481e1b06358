"""Given-data (rank-based) first-order indices: convergence to Ishigami's exact S1, honest errors, ties, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import given_data
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import ishigami, ishigami_indices, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
EXACT = ishigami_indices()["S1"]


def errors(n: int, seeds: range) -> np.ndarray:
    """``[seeds, 3]`` errors of S1 and ``[seeds, 3]`` standard errors on ``n`` i.i.d. Ishigami points."""
    out = []
    for seed in seeds:
        x = given_data.sample(ISHIGAMI, n, seed=seed)
        ds = given_data.analyze(x, ishigami(x), ISHIGAMI, seed=seed)
        out.append((ds.S1.isel(output=0).values - EXACT, ds.S1_se.isel(output=0).values))
    return np.array(out)


def test_converges_to_ishigamis_exact_first_order_indices():
    # Mean absolute error over 6 seeds falls like 1/sqrt(N): measured 0.020, 0.012, 0.0067 at N = 2^12, 2^14, 2^16
    # (20 seeds); at 2^16 the largest error of 20 seeds was 0.014 -> 0.02.
    mean = {n: np.abs(errors(n, range(6))[:, 0]).mean() for n in (2**12, 2**16)}
    assert mean[2**16] < mean[2**12] / 2.5, mean
    worst = errors(2**16, range(3))
    assert np.abs(worst[:, 0]).max() < 0.02
    assert (np.abs(worst[:, 0]) <= 4 * worst[:, 1]).all()


def test_batch_errors_are_honest():
    # 20 seeds x 3 inputs at N = 2^14: the errors over their standard errors scatter like Student t_7.
    e = errors(2**14, range(20))
    z = (e[:, 0] / e[:, 1]).ravel()
    assert 0.6 < z.std() < 1.6 and np.mean(np.abs(z) < 2.365) > 0.85, (z.std(), np.mean(np.abs(z) < 2.365))


def test_ties_are_broken_at_random():
    # x0 takes 8 levels (a factorial-like column with ties), y = x0: neighbours in x0 share y, so S1 ~ 1;
    # x1 is continuous and unrelated: S1 ~ 0.
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.integers(8, size=4096).astype(float), rng.random(4096), rng.random(4096)])
    ds = given_data.analyze(x, x[:, :1], ISHIGAMI, seed=2)
    assert ds.S1.values[0, 0] == pytest.approx(1.0, abs=0.01)
    assert abs(ds.S1.values[1, 0]) < 4 * ds.S1_se.values[1, 0]
    assert ds.attrs["n_points"] == 4096 and ds.attrs["batches"] == 8


def test_no_batches_no_error_variables():
    x = given_data.sample(ISHIGAMI, 256, seed=0)
    ds = given_data.analyze(x, ishigami(x), ISHIGAMI, batches=0)
    assert "S1_se" not in ds and "S1_interval" not in ds and ds.attrs["intervals"] == "none"


@pytest.mark.parametrize("points, values, kwargs, error, message", [
    (np.zeros((64, 2)), np.zeros((64, 1)), {}, DataError, "`points` must have shape [N, 3], got [64, 2]"),
    (np.zeros((64, 3)), np.zeros((63, 1)), {}, DataError, "`values` must have 64 rows (one per point), got 63"),
    (np.full((64, 3), np.nan), np.zeros((64, 1)), {}, DataError, "`points` and `values` must be finite"),
    (np.zeros((64, 3)), np.zeros((64, 1)), {"batches": 1}, ConfigError, "`batches` must be 0 (no error estimate)"),
    (np.zeros((20, 3)), np.zeros((20, 1)), {}, DataError, "20 points are too few for 8 batches of at least 4"),
])
def test_bad_input(points, values, kwargs, error, message):
    with pytest.raises(error) as info:
        given_data.analyze(points, values, ISHIGAMI, **kwargs)
    assert message in str(info.value)
