"""One-pass, exactly mergeable means and co-moments of a sample that arrives in blocks.

The sufficient statistics of every estimator that is a function of means and covariances of per-row
variables (the pick-freeze Sobol' estimators, later DGSM's mean squared derivatives, the active-subspace
matrix, Monte Carlo moments): the count ``n``, the means ``mean_i`` of ``p`` variables and the co-moments
``C_ij = sum_r (x_ri - mean_i) (x_rj - mean_j)`` of a chosen list of pairs ``(i, j)`` (a full covariance of
``p`` variables is ``p^2`` numbers per output; an estimator usually needs a few of them). Each variable may
carry trailing dims (the outputs), so one object holds them for every output at once, in float64.

A block is reduced in two passes over its rows (its mean, then the products of the deviations from it), and
blocks are joined by Chan, Golub & LeVeque's pairwise update::

    n = n_a + n_b,   delta = mean_b - mean_a,   mean = mean_a + delta n_b / n,
    C_ij = C_a,ij + C_b,ij + delta_i delta_j n_a n_b / n

which is exact in real arithmetic and numerically stable (no sum of raw squares: an output of mean 1e9 and
spread 1 keeps its variance to round-off), so shards of one sample merged in any order give the statistics
of the whole to float64 round-off. Welford's update is the case of a block of one row.

This is a module of ``sensitivity.analyses`` rather than of one study's package because every study's
one-pass estimator uses it (the indices now, the propagation's moments next) and the study packages may not
import each other both ways (``tests/test_layout.py``).

References
----------
Welford, B. P. (1962), Note on a method for calculating corrected sums of squares and products,
Technometrics 4(3), 419-420, doi:10.1080/00401706.1962.10490022.
Chan, T. F., Golub, G. H. & LeVeque, R. J. (1983), Algorithms for computing the sample variance: analysis and
recommendations, The American Statistician 37(3), 242-247, doi:10.1080/00031305.1983.10483115.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


@dataclass(frozen=True)
class Moments:
    """Count, means ``[p, *shape]`` and co-moments ``[q, *shape]`` of the ``pairs [q, 2]`` of ``p`` variables.

    Build one from a block with :meth:`of` (or an empty one with :meth:`empty`), join blocks with
    :meth:`merge` (or :meth:`update`, which merges a block in); read :meth:`covariance`. ``count`` is the
    number of rows (``0`` for an empty set, whose means and co-moments are zeros).
    """

    pairs: np.ndarray
    count: int
    mean: np.ndarray
    comoment: np.ndarray

    @classmethod
    def empty(cls, n_variables: int, pairs: np.ndarray, shape: tuple[int, ...] = ()) -> Moments:
        """The statistics of no rows, ready to :meth:`update`."""
        pairs = _checked_pairs(pairs, n_variables)
        return cls(pairs, 0, np.zeros((n_variables, *shape)), np.zeros((len(pairs), *shape)))

    @classmethod
    def of(cls, block: np.ndarray, pairs: np.ndarray, weights: np.ndarray | None = None, *,
           overwrite: bool = False) -> Moments:
        """The statistics of ``block [n, p, *shape]`` (rows first), in two passes over it.

        ``overwrite``: ``block`` is a float64 array the caller discards, centred in place (no copy of it: on a
        Sobol' block of 1,024 rows, 14 variables and 100 outputs the copy cost as much as the products).

        ``weights [K, n]`` (optional; each row summing to ``n``, e.g. bootstrap multiplicities) gives ``K``
        weighted sets at once, stacked on a new axis after the variable axis (means ``[p, K, *shape]``):
        ``mean_k = sum_r w_kr x_r / n`` and ``C_k = sum_r w_kr (x_r - mean_k)(x_r - mean_k)``, computed from
        the deviations from the unweighted mean, so they keep its accuracy.
        """
        x = np.asarray(block, dtype=np.float64)
        if x.ndim < 2 or x.shape[0] == 0:
            raise DataError(f"a block of statistics must have shape [n, p, ...] with n >= 1, got {list(x.shape)}")
        pairs = _checked_pairs(pairs, x.shape[1])
        centre = x.mean(axis=0)
        dev = np.subtract(x, centre, out=x if overwrite and x is block else None)
        n = x.shape[0]
        if weights is None:
            return cls(pairs, n, centre, sums_of_products(dev, pairs))
        products = dev[:, pairs[:, 0]] * dev[:, pairs[:, 1]]
        w = np.asarray(weights, dtype=np.float64)
        shift = _weighted_mean(w, dev)  # [p, K, *shape]: mean_k - centre
        comoment = n * (_weighted_mean(w, products) - shift[pairs[:, 0]] * shift[pairs[:, 1]])
        return cls(pairs, n, np.expand_dims(centre, 1) + shift, comoment)

    def merge(self, other: Moments) -> Moments:
        """The statistics of both sets of rows (Chan et al.'s pairwise update)."""
        if not np.array_equal(self.pairs, other.pairs) or self.mean.shape != other.mean.shape:
            raise DataError(f"statistics of {self.mean.shape} with {len(self.pairs)} co-moments cannot merge with "
                            f"{other.mean.shape} with {len(other.pairs)}: they are not of the same variables")
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / n)
        cross = delta[self.pairs[:, 0]] * delta[self.pairs[:, 1]] * (self.count * other.count / n)
        return Moments(self.pairs, n, mean, self.comoment + other.comoment + cross)

    def update(self, block: np.ndarray) -> Moments:
        """These statistics with the rows of ``block [n, p, *shape]`` added (a new object)."""
        return self.merge(Moments.of(block, self.pairs))

    def covariance(self, ddof: int = 0) -> np.ndarray:
        """``[q, *shape]`` covariances of the pairs, ``C / (n - ddof)``."""
        return self.comoment / (self.count - ddof)

    def to_dataset(self) -> xr.Dataset:
        """The statistics as a dataset (for a shard's file or a checkpoint); :meth:`from_dataset` reads it back."""
        extra = tuple(f"dim_{k}" for k in range(self.mean.ndim - 1))
        return xr.Dataset(
            {"mean": (("variable", *extra), self.mean, {"long_name": "mean of the variable", "units": "1"}),
             "comoment": (("pair", *extra), self.comoment,
                          {"long_name": "sum of products of the deviations from the means", "units": "1"}),
             "pairs": (("pair", "side"), self.pairs.astype(np.int32),
                       {"long_name": "variables of the co-moment", "units": "1"})},
            attrs={"count": int(self.count)},
        )

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> Moments:
        """The statistics written by :meth:`to_dataset`."""
        return cls(np.asarray(ds["pairs"].values, dtype=np.intp), int(ds.attrs["count"]),
                   np.asarray(ds["mean"].values, dtype=np.float64), np.asarray(ds["comoment"].values, np.float64))


def sums_of_products(dev: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``[q, *shape]`` sums over the rows of ``dev [n, p, *shape]`` of the products of the ``pairs [q, 2]``.

    Most of the ``p^2`` products (the active-subspace matrix): :func:`_gram`. A few (a Sobol' block's 20 of 196):
    one sum of products over the rows per first variable of the pairs, the deviations read in place (the
    diagonal pairs all in one): 4.5x faster than the Gram matrix on a block of 1,024 rows, 14 variables and 100
    outputs, which spends its time transposing the block for BLAS and forming products nobody reads.
    """
    n, p = dev.shape[:2]
    if 4 * len(pairs) >= p * p:
        return _gram(dev)[pairs[:, 0], pairs[:, 1]]
    flat = dev.reshape(n, p, -1)
    out = np.empty((len(pairs), flat.shape[2]))
    diagonal = pairs[:, 0] == pairs[:, 1]
    if diagonal.any():
        both = _columns(flat, pairs[diagonal, 0])
        out[diagonal] = np.einsum("njs,njs->js", both, both)
    for i in np.unique(pairs[~diagonal, 0]):
        rows = np.flatnonzero(~diagonal & (pairs[:, 0] == i))
        out[rows] = np.einsum("ns,njs->js", flat[:, i], _columns(flat, pairs[rows, 1]))
    return out.reshape((len(pairs),) + dev.shape[2:])


def _columns(flat: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``flat[:, index]``, a view when ``index`` is a run of consecutive variables."""
    if len(index) and np.array_equal(index, np.arange(index[0], index[0] + len(index))):
        return flat[:, index[0] : index[0] + len(index)]
    return flat[:, index]


def _gram(dev: np.ndarray) -> np.ndarray:
    """``[p, p, *shape]`` sums over the rows of ``dev [n, p, *shape]`` of the products of every two variables: one
    batched matrix product per trailing position (BLAS reads the deviations once)."""
    n, p = dev.shape[:2]
    flat = np.ascontiguousarray(np.moveaxis(dev.reshape(n, p, -1), 2, 0))  # [k, n, p]
    gram = np.matmul(flat.transpose(0, 2, 1), flat)  # [k, p, p]
    return np.moveaxis(gram, 0, 2).reshape((p, p) + dev.shape[2:])


def _weighted_mean(weights: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``weights [K, n] @ terms [n, p, *shape] / n`` with the ``K`` axis after ``p``: ``[p, K, *shape]``."""
    n = terms.shape[0]
    out = (weights @ terms.reshape(n, -1) / n).reshape((weights.shape[0],) + terms.shape[1:])
    return np.moveaxis(out, 0, 1)


def _checked_pairs(pairs: np.ndarray, n_variables: int) -> np.ndarray:
    """``pairs`` as an ``[q, 2]`` integer array of variable indices below ``n_variables``."""
    p = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    if p.size and (p.min() < 0 or p.max() >= n_variables):
        raise DataError(f"co-moment pairs must index the {n_variables} variables, got {p.tolist()}")
    return p
