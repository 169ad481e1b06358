"""Heavy-tail diagnostics of each output: is its variance dominated by rare points, or infinite?

Variance-based indices divide by the output variance ``V`` and their estimators are means of
products of outputs, so they need ``E[y^2] < inf`` to exist and ``E[y^4] < inf`` for their
intervals to mean anything. A model such as ``H ~ Ks^-0.6`` with ``Ks`` uniform near 0 has a
power-law tail ``P(H > h) ~ h^-1/0.6`` (tail index 1.67 < 2: infinite variance), and its indices
wander from seed to seed however narrow each interval is. Two checks, per output, on the sample
the indices were computed from:

* ``tail_share``: the share of ``sum (y - mean)^2`` contributed by the top 0.1 % of points
  (at least one point). A finite-variance output converges to a fixed share: 0.013 for a normal,
  0.013 for Ishigami, 0.047 for an exponential, 0.13-0.21 for a lognormal with sigma = 1,
  0.08-0.26 for a Student t with 3 degrees of freedom, 0.34-0.48 for ``u^-0.4`` (finite variance,
  infinite fourth moment), 0.63-0.85 for ``u^-0.6`` (measured on 2,560-327,680 points; the SEIR demo's
  daily new infections peak at 0.12). Above :data:`SHARE_LIMIT` = 0.3 rare points dominate the variance.
* ``tail_index``: Hill's (1975, doi:10.1214/aos/1176343247) estimate of the tail index ``alpha``
  of ``|y - median(y)|`` from its top 1 % (at least 10 points):
  ``1 / alpha = mean_{i <= k} ln x_(i) - ln x_(k+1)``. ``alpha <= 2`` means no finite variance;
  measured 1.5-1.7 for ``u^-0.6`` (exact 1.67), 2.1-2.3 for ``u^-0.4`` (2.5), 2.8-2.9 for a
  Student t with 3 degrees of freedom (3), 9-12 for a normal and for Ishigami. The median
  centring biases it low on one-sided tails (2.4 for a Pareto of index 3 on 65,536 points).

The checks read the design's first :func:`sample_rows` points: 65,536, fewer on many outputs (their float64
copy held to :data:`SAMPLE_BYTES`), never fewer than 4,096 (the Hill estimate then still reads 41 points).
Both come from one selection per output: its smallest and largest ``k + 1`` values and its median, each
sorted out of the few thousand values that order statistics of every :data:`STRIDE`-th value bracket
(:func:`_bands`); the deviations are formed on those alone.

``tail_flag``: 0 ok; 1 ``heavy_tail`` (share above the limit); 2 ``infinite_variance`` (Hill
index below :data:`INDEX_LIMIT` = 2, whatever the share). NaN diagnostics (a constant output,
fewer than 11 points) flag 0.
"""
from __future__ import annotations

import math

import numpy as np

from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Share of the sum of squared deviations above which the top 0.1 % of points "dominate" it.
SHARE_LIMIT = 0.3
#: Hill tail index below which the output variance is taken as infinite.
INDEX_LIMIT = 2.0
#: Points of the design the checks read at most, and at least whatever the number of outputs.
MAX_ROWS, MIN_ROWS = 1 << 16, 1 << 12
#: Bytes of float64 values (points x outputs) the checks' sample is held to, above :data:`MIN_ROWS` points.
SAMPLE_BYTES = 32 << 20
#: Top fraction of the squared deviations whose share :func:`tail_share` gives.
SHARE_TOP = 0.001
#: Top fraction of ``|y - median|``, and the fewest values, Hill's estimate reads (:func:`tail_index`).
INDEX_TOP, INDEX_MINIMUM = 0.01, 10
#: Every how many values of an output the selections' sample takes (:func:`_bands`): odd, so that it is not in step
#: with a design's rows per base row (G + 2 or 2G + 2, often a power of two: every 16th value can be all `A` rows).
STRIDE = 17
#: ``tail_flag`` values.
TAIL_OK, HEAVY_TAIL, INFINITE_VARIANCE = 0, 1, 2


def sample_rows(m: int) -> int:
    """Points of the design the checks read on ``m`` outputs: ``min(MAX_ROWS, max(MIN_ROWS, SAMPLE_BYTES / 8m))``
    (65,536 up to 64 outputs, 41,943 on 100, 6,990 on an ensemble's 600 side-by-side columns, 4,096 from 1,024)."""
    return min(MAX_ROWS, max(MIN_ROWS, SAMPLE_BYTES // (8 * m)))


def tail_share(values: np.ndarray, top: float = SHARE_TOP) -> np.ndarray:
    """``[m]`` share of ``sum (y - mean)^2`` from the ``ceil(top N)`` largest squared deviations.

    ``values`` is ``[N, m]``, one column per output.
    """
    return _checks(values, top, INDEX_TOP, INDEX_MINIMUM)[0]


def tail_index(values: np.ndarray, top: float = INDEX_TOP, minimum: int = INDEX_MINIMUM) -> np.ndarray:
    """``[m]`` Hill estimate of the tail index of ``|y - median|`` from its top ``max(minimum, ceil(top N))`` values."""
    return _checks(values, SHARE_TOP, top, minimum)[1]


def _checks(values: np.ndarray, share_top: float, index_top: float, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    """``[m]`` :func:`tail_share` and ``[m]`` :func:`tail_index` of ``values [N, m]`` from one selection per output.

    The top ``k`` squared deviations from the mean, and the top ``k + 1`` of ``|y - median|``, are among the
    ``k + 1`` smallest and largest values, so only those (and the median's) are selected (:func:`_bands`), and the
    deviations are formed on them alone. An output with a non-finite value, or none, has NaN checks.
    """
    x = _by_output(values)  # [m, N]
    m, n = x.shape
    if n == 0:
        return np.full(m, np.nan), np.full(m, np.nan)
    k_share, k_index = max(1, math.ceil(share_top * n)), max(minimum, math.ceil(index_top * n))
    with np.errstate(invalid="ignore", over="ignore"):
        mean = x.mean(axis=1, dtype=np.float64)
        total = np.empty(m)
        for r in range(m):  # one output at a time: its float64 deviations stay in cache
            d = x[r].astype(np.float64)
            d -= mean[r]
            d *= d
            total[r] = d.sum()  # not BLAS's dot: its threads spin on after the call
    k = max(k_share, k_index + 1)
    middle = ((n - 1) // 2, n // 2 + 1)
    if 2 * k >= n:
        low, median_band, high = _bands(x, [(0, n), middle, (n, n)])
    else:
        low, median_band, high = _bands(x, [(0, k), middle, (n - k, n)])
    candidates = np.concatenate([low, high], axis=1).astype(np.float64)  # [m, <= 2k]
    median = median_band[:, [0, -1]].astype(np.float64).mean(axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        d2 = np.square(candidates - mean[:, None])
        largest = np.sort(d2, axis=1)[:, -k_share:].sum(axis=1)
    bad = ~np.isfinite(mean)
    share = np.divide(largest, total, out=np.full(m, np.nan), where=(total > 0) & ~bad)
    if n <= k_index:
        return share, np.full(m, np.nan)
    top = np.sort(np.abs(candidates - median[:, None]), axis=1)[:, -(k_index + 1):]  # [m, k + 1] ascending
    threshold = top[:, :1]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.log(top[:, 1:] / np.where(threshold > 0, threshold, np.nan)).mean(axis=1)
        index = np.where(h > 0, 1.0 / h, np.where(h == 0, np.inf, np.nan))
    return share, np.where(bad, np.nan, index)


def _bands(x: np.ndarray, bands: list[tuple[int, int]]) -> list[np.ndarray]:
    """For each ``(lo, hi)`` of ``bands``, ``[m, hi - lo]`` the values of ranks ``lo .. hi - 1`` of each row of
    ``x [m, N]``, ascending.

    Each band is sorted out of the values between two order statistics of every :data:`STRIDE`-th value of the row
    that bracket it (4 binomial standard deviations of their ranks beyond it: about 2,000 of 41,943 values on a
    continuous output), found in one selection of that sample for every band; a row they do not bracket (ties) is
    selected whole, as are rows of fewer than 256 :data:`STRIDE` values.
    """
    m, n = x.shape
    sample = x[:, ::STRIDE]
    s = sample.shape[1]
    if s < 256:
        ranks = sorted({r for lo, hi in bands if hi > lo for r in (lo, hi - 1)})
        whole = np.partition(x, ranks, axis=1) if ranks else x
        return [np.sort(whole[:, lo:hi], axis=1) for lo, hi in bands]
    edges = [(lo // STRIDE - _spread(lo // STRIDE, s), (hi - 1) // STRIDE + _spread((hi - 1) // STRIDE, s) + 1)
             for lo, hi in bands]
    ordered = np.partition(sample, sorted({e for pair in edges for e in pair if 0 <= e < s}), axis=1)
    out = []
    for (lo, hi), (a, b) in zip(bands, edges):
        keep, below = None, np.zeros(m, np.int64)
        if a >= 0:
            keep = x >= ordered[:, a, None]
            below = n - np.count_nonzero(keep, axis=1)
        if b < s:
            under = x <= ordered[:, b, None]
            keep = under if keep is None else np.logical_and(keep, under, out=keep)
        keep = np.ones(x.shape, bool) if keep is None else keep
        counts = np.count_nonzero(keep, axis=1)
        bracketed = (below <= lo) & (below + counts >= hi)
        for r in np.flatnonzero(~bracketed):  # select the whole row instead
            keep[r], below[r], counts[r] = True, 0, n
        padded = np.full((m, counts.max()), np.inf, x.dtype)  # above every kept value (none is infinite)
        padded[np.arange(padded.shape[1]) < counts[:, None]] = x[keep]  # both row-major: each row's kept values
        padded.sort(axis=1)
        out.append(np.take_along_axis(padded, (lo - below)[:, None] + np.arange(hi - lo), axis=1))
    return out


def _spread(rank: int, s: int) -> int:
    """Ranks 4 binomial standard deviations span around ``rank`` in a sample of ``s``, plus one."""
    return math.ceil(4 * math.sqrt(max(rank, 1) * max(s - rank, 1) / s)) + 1


def _by_output(values: np.ndarray) -> np.ndarray:
    """``[m, N]`` copy of ``values [N, m]`` in its float dtype (float32 stays float32: the same order statistics,
    half the bytes; float64 otherwise), each output's values contiguous: the selections then run along rows."""
    values = np.asarray(values)
    return np.array(values.T, dtype=values.dtype if values.dtype in (np.float32, np.float64) else np.float64,
                    order="C")


def tail_variables(values: np.ndarray) -> dict[str, xr.Variable]:
    """``tail_share``, ``tail_index`` and ``tail_flag`` on dim ``output`` for ``values [N, m]``."""
    share, index = _checks(values, SHARE_TOP, INDEX_TOP, INDEX_MINIMUM)
    flag = np.where(index < INDEX_LIMIT, INFINITE_VARIANCE, np.where(share > SHARE_LIMIT, HEAVY_TAIL, TAIL_OK))
    return {
        "tail_share": xr.Variable("output", share, {
            "long_name": "share of the output's sum of squared deviations from its top 0.1 % of points", "units": "1"}),
        "tail_index": xr.Variable("output", index, {
            "long_name": "Hill estimate of the tail index of |y - median| from its top 1 % of points", "units": "1"}),
        "tail_flag": xr.Variable("output", flag.astype(np.int8), {
            "long_name": "heavy-tail check of the output",
            "flag_values": np.array([TAIL_OK, HEAVY_TAIL, INFINITE_VARIANCE], np.int8),
            "flag_meanings": "ok heavy_tail infinite_variance",
            "comment": f"heavy_tail: tail_share > {SHARE_LIMIT:g}; infinite_variance: tail_index < {INDEX_LIMIT:g}",
        }),
    }
