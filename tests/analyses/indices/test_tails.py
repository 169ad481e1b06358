"""Heavy-tail checks: closed forms of the tail share and of a Pareto tail index, an infinite-variance model flagged."""
from __future__ import annotations

import numpy as np
import xarray as xr

from sensitivity.analyses.indices import dgsm, sobol, sobol_onepass, tails
from sensitivity.analyses.indices.driver import combine_results, summary_lines
from tests.helpers.functions import ishigami, ishigami_jacobian, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
UNIT = uniform_space(2, 0.0, 1.0)


def flood(x: np.ndarray) -> np.ndarray:
    """``[N, 1]`` values ``x0^-0.6 + x1``: ``P(y > h) ~ h^(-1/0.6)``, tail index 1.67, infinite variance."""
    return (x[:, 0] ** -0.6 + x[:, 1])[:, None]


def flood_jacobian(x: np.ndarray) -> np.ndarray:
    return np.stack([-0.6 * x[:, 0] ** -1.6, np.ones(len(x))], axis=1)[:, None, :]


def test_tail_share_of_a_uniform_output_is_its_closed_form():
    # |y - 1/2| is uniform on [0, 1/2]: the top fraction p of squared deviations holds 1 - (1 - p)^3 of their sum.
    n = 16384
    y = (np.arange(n) + 0.5) / n
    p = 17 / n  # ceil(0.001 n) points
    np.testing.assert_allclose(tails.tail_share(y[:, None]), 1 - (1 - p) ** 3, rtol=1e-3)
    assert np.isnan(tails.tail_share(np.ones((100, 1)))).all()  # a constant output has no share


def test_hill_index_recovers_a_pareto_tail():
    # y = u^(-1/alpha) is Pareto with tail index alpha; the median centring biases the estimate low a little.
    u = np.random.default_rng(1).random((65536, 8))
    for alpha in (1.5, 3.0):
        estimate = tails.tail_index(u ** (-1 / alpha))
        assert (np.abs(estimate / alpha - 1) < 0.25).all(), (alpha, estimate)
    assert np.isnan(tails.tail_index(np.zeros((1000, 1)))).all()
    assert np.isnan(tails.tail_index(u[:10])).all()  # too few points


def test_both_checks_select_the_top_values_as_a_full_sort_does_whatever_the_columns_ties():
    # the top values and the median are found among those a sample of the column brackets; a sort of each whole
    # column is the oracle (a column whose sample brackets nothing: every 17th value far above the others)
    rng = np.random.default_rng(2)
    n = 20000
    i = np.arange(n)
    y = np.stack([rng.lognormal(size=n), np.full(n, 3.0), np.round(rng.normal(size=n)), np.arange(n, 0.0, -1.0),
                  np.arange(n, dtype=float), rng.standard_t(3, size=n),
                  np.where(i % tails.STRIDE == 0, 1e6 + i, rng.normal(size=n))], axis=1)
    d2 = np.sort((y - y.mean(axis=0)) ** 2, axis=0)
    k = 20  # ceil(0.001 n)
    with np.errstate(invalid="ignore"):
        share = d2[-k:].sum(axis=0) / d2.sum(axis=0)
    np.testing.assert_allclose(tails.tail_share(y), share, rtol=1e-12)
    x = np.sort(np.abs(y - np.median(y, axis=0)), axis=0)[-201:]  # the top 200 (1 %) and the next
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.log(x[1:] / np.where(x[0] > 0, x[0], np.nan)).mean(axis=0)
        index = np.where(h > 0, 1 / h, np.where(h == 0, np.inf, np.nan))
    np.testing.assert_allclose(tails.tail_index(y), index, rtol=1e-12)


def test_infinite_variance_is_flagged_and_ishigami_is_not():
    x = sobol.sample(UNIT, 1024, seed=0)
    ds = sobol.analyze(flood(x), UNIT)
    assert ds.tail_flag.item() == tails.INFINITE_VARIANCE and ds.tail_index.item() < 2
    assert ds.tail_share.item() > tails.SHARE_LIMIT  # and rare points dominate it
    assert ds.tail_flag.attrs["flag_meanings"] == "ok heavy_tail infinite_variance"
    p = dgsm.sample(UNIT, 1024, seed=0)
    assert dgsm.analyze(flood_jacobian(p), flood(p), UNIT).tail_flag.item() == tails.INFINITE_VARIANCE

    x = sobol.sample(ISHIGAMI, 1024, seed=0)
    ok = sobol.analyze(ishigami(x), ISHIGAMI)
    assert ok.tail_flag.item() == tails.TAIL_OK and ok.tail_share.item() < 0.03 and ok.tail_index.item() > 5
    p = dgsm.sample(ISHIGAMI, 1024, seed=0)
    assert dgsm.analyze(ishigami_jacobian(p), ishigami(p), ISHIGAMI).tail_flag.item() == tails.TAIL_OK


def test_many_outputs_are_checked_on_a_byte_bounded_sample_that_still_flags_an_infinite_variance():
    m = 1024  # 32 MiB of float64 / (8 B x 1,024 outputs) = 4,096 points: the floor
    assert tails.sample_rows(m) == tails.MIN_ROWS == 4096 and tails.sample_rows(1) == tails.MAX_ROWS
    assert all(tails.sample_rows(k) * 8 * k <= tails.SAMPLE_BYTES for k in (100, 600, 1024))

    def wide(x):  # the flood in column 0, the finite-variance x1 (uniform: share, index closed-form finite) after
        return np.hstack([flood(x), np.repeat(x[:, 1:2], m - 1, axis=1)]).astype(np.float32)

    acc = sobol_onepass.statistics(wide, UNIT, 2048, seed=0, block=256)  # 8,192 points, the first 4,096 kept
    assert acc.tail_values().shape == (4096, m) and acc.tail_values().dtype == np.float32
    ds = sobol_onepass.analyze_statistics(acc, UNIT)
    assert ds.tail_flag.values[0] == tails.INFINITE_VARIANCE and ds.tail_index.values[0] < 2
    assert (ds.tail_flag.values[1:] == tails.TAIL_OK).all()
    first = wide(sobol.sample(UNIT, 2048, seed=0))[:4096].astype(np.float64)
    np.testing.assert_allclose(ds.tail_index.values, tails.tail_index(first), rtol=1e-12)


def test_the_summary_warns_about_flagged_outputs_only():
    x = sobol.sample(UNIT, 1024, seed=0)
    flagged = sobol.analyze(flood(x), UNIT, output_names=["water_level"])
    lines = summary_lines(combine_results({"sobol": flagged}, xr.Dataset()))
    assert lines == [("warning", "sobol: heavy-tailed outputs, 1 with a tail index < 2 (infinite variance), 0 with "
                      "> 30% of the variance from the top 0.1 % of points, of 1 (water_level): their indices and "
                      "intervals are unreliable")]
    x = sobol.sample(ISHIGAMI, 1024, seed=0)
    assert summary_lines(combine_results({"sobol": sobol.analyze(ishigami(x), ISHIGAMI)}, xr.Dataset())) == []
