"""The one-pass partition estimator of given-data first-order indices: equal to a two-pass numpy computation of the
same bins to 1e-10, merged shards equal to one run, within tolerance of the rank-based estimator on the same points,
and equal to closed forms (Ishigami's S1; the full first-order index of a correlated linear Gaussian model)."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import given_data, given_data_bins
from sensitivity.errors import ConfigError
from tests.helpers.closed_forms import SPACE, exact_indices, linear
from tests.helpers.functions import ishigami, ishigami_indices, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)


def two_pass(x: np.ndarray, y: np.ndarray, bins: int) -> np.ndarray:
    """``[d, m]`` the bias-corrected between-bin share of variance, bins of ``U(-pi, pi)`` by hand, in two passes."""
    edges = np.clip(np.floor((x + np.pi) / (2 * np.pi) * bins), 0, bins - 1).astype(int)
    total = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    out = []
    for i in range(x.shape[1]):
        filled = np.unique(edges[:, i])
        means = np.stack([y[edges[:, i] == b].mean(axis=0) for b in filled])
        counts = np.array([(edges[:, i] == b).sum() for b in filled])
        between = (counts[:, None] * (means - y.mean(axis=0)) ** 2).sum(axis=0)
        within = sum(((y[edges[:, i] == b] - mu) ** 2).sum(axis=0) for b, mu in zip(filled, means))
        out.append((between - (len(filled) - 1) * within / (len(y) - len(filled))) / total)
    return np.array(out)


def two_outputs(x: np.ndarray) -> np.ndarray:
    """Ishigami and Ishigami shifted by 1e4 (the merged statistics must keep its variance)."""
    y = ishigami(x)
    return np.concatenate([y, y + 1e4], axis=1)


def test_one_pass_bins_equal_the_two_pass_computation_on_the_same_points():
    n, bins, batches = 8192, 16, 4
    ds = given_data_bins.analyze_model(two_outputs, ISHIGAMI, n, seed=3, bins=bins, batches=batches, block=1000)
    x = given_data.sample(ISHIGAMI, n, seed=3)  # the same points
    np.testing.assert_allclose(ds.S1.values, two_pass(x, two_outputs(x), bins), rtol=1e-10, atol=1e-12)
    rows = [slice(k * n // batches, (k + 1) * n // batches) for k in range(batches)]  # consecutive batches
    parts = np.stack([two_pass(x[r], two_outputs(x[r]), bins) for r in rows])
    np.testing.assert_allclose(ds.S1_se.values, parts.std(axis=0, ddof=1) / np.sqrt(batches), rtol=1e-9)
    np.testing.assert_allclose(ds.variance.values, two_outputs(x).var(axis=0), rtol=1e-10)
    assert ds.attrs["bins"] == bins and ds.attrs["n_points"] == n and ds.S1_interval.dims[-1] == "bound"


def test_shards_merged_in_any_order_equal_one_run():
    n, bins = 4096, 16
    x, whole = given_data.sample(ISHIGAMI, n, seed=1), given_data_bins.Accumulator(n, 4, bins)
    whole.update(given_data_bins.bin_of(ISHIGAMI, x, bins), two_outputs(x))
    shards = []
    for lo, hi in ((0, 1000), (1000, 2500), (2500, 4096)):
        acc = given_data_bins.Accumulator(n, 4, bins, (lo, hi))
        acc.update(given_data_bins.bin_of(ISHIGAMI, x[lo:hi], bins), two_outputs(x[lo:hi]))
        shards.append(acc)
    merged = shards[2].merge(shards[0]).merge(shards[1])
    for a, b in zip(merged.estimates(), whole.estimates()):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_bins_agree_with_the_rank_based_estimator_and_ishigamis_closed_form():
    # N = 2^18, 64 bins: 10 seeds, largest error against the closed form 0.0040 -> 0.01 (binning bias of x2 0.0014);
    # the gap to the rank-based estimate at most 2.2 combined standard errors -> 4.
    n = 1 << 18
    ds = given_data_bins.analyze_model(ishigami, ISHIGAMI, n, seed=4)
    np.testing.assert_allclose(ds.S1.isel(output=0), ishigami_indices()["S1"], atol=0.01)
    x = given_data.sample(ISHIGAMI, n, seed=4)
    ranked = given_data.analyze(x, ishigami(x), ISHIGAMI, seed=4)
    # Two estimators on the same points: their difference is within 4 of their standard errors combined.
    gap = np.abs(ds.S1 - ranked.S1).values
    assert (gap <= 4 * np.hypot(ds.S1_se, ranked.S1_se).values).all(), gap


def test_bins_give_the_full_first_order_index_of_dependent_inputs():
    # N = 2^17 correlated Gaussian inputs, 64 bins: 10 seeds, largest error 0.0048 -> 0.01.
    ds = given_data_bins.analyze_model(linear, SPACE, 1 << 17, seed=6)
    np.testing.assert_allclose(ds.S1.values, exact_indices()["S1_full"], atol=0.01)
    assert ds.attrs["inputs"] == "dependent (full first-order indices)"


@pytest.mark.parametrize("kwargs, message", [
    ({"bins": 1}, r"`bins` must be an integer in \[2, n / 4 = 64\], got 1"),
    ({"batches": 1}, "`batches` must be 0 .* or an integer >= 2, got 1"),
    ({"bins": 32, "batches": 8}, "256 points are too few for 8 batches of at least 4 points per bin"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        given_data_bins.analyze_model(ishigami, ISHIGAMI, 256, **kwargs)
