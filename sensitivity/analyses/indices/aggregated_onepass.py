"""Aggregated Sobol' and PCA-based indices in one pass: the design generated, evaluated and reduced block by block.

:func:`analyze_model` gives :func:`~sensitivity.analyses.indices.aggregated.analyze`'s dataset of ``model`` on
the rows of :func:`~sensitivity.analyses.indices.aggregated.sample` without holding them. Both parts of it are
functions of one-pass statistics of the per-row variables of :mod:`~sensitivity.analyses.indices.pickfreeze`
(the ``P = G + 2`` values of a base row, then the differences ``D_i = f(A_B^(i)) - f(A)``):

aggregated indices
    ``S_i = sum_k w_k V_k S_ik / sum_k w_k V_k`` is a ratio of weighted sums over the elements of the
    pick-freeze numerators and variances (Gamboa, Janon, Klein & Lagnoux 2014, doi:10.1214/14-EJS895), so it
    comes from the per-element statistics of :class:`~sensitivity.analyses.indices.pickfreeze.Accumulator`
    (one set per randomised-QMC scrambling), exactly as the in-memory route computes it;
PCA-based indices
    the basis covariance of the ``A`` and ``B`` rows is ``(C_AA + C_BB + N/2 (m_A - m_B)(m_A - m_B)^T) /
    (2N - 1)`` and every pick-freeze estimator of a linear score ``s = (y - c) diag(sqrt w) v`` reads the means
    ``v^T m`` and co-moments ``v^T C v`` of the values: so the means ``[P + G, k, M]`` and the co-moment
    *matrices* ``[q, k, M, M]`` of the pairs the estimators read (:func:`~sensitivity.analyses.indices.pickfreeze.pairs`)
    over the ``M`` elements aggregated over, one set per scrambling (:class:`CrossMoments`, merged by Chan et
    al.'s update), give the principal directions (an eigendecomposition instead of the in-memory route's
    singular value decomposition of the rows: the same directions and variances to round-off) and then the
    scores' indices, in one pass.

Memory: ``q R k M^2`` float64 numbers for the matrices (``q = 3 G + 2`` pairs, ``R`` scramblings, ``k`` kept
elements), independent of ``N`` but quadratic in ``M``: above :data:`MATRIX_ELEMENTS` the route is refused (a
series of 100 days: 2.3e5 per scrambling and kept element with 7 inputs; a field of 10^4 cells does not fit).
Bootstrap intervals resample the rows, which the in-memory route holds; here randomised-QMC intervals or none.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Callable, Sequence

import numpy as np

from sensitivity.analyses.indices import aggregated, design, pickfreeze, sobol_onepass
from sensitivity.analyses.indices.aggregated import Weights
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: The most float64 numbers the PCA co-moment matrices of the one-pass route may hold (1 GiB).
MATRIX_ELEMENTS = 1 << 27


@dataclass(frozen=True)
class CrossMoments:
    """Count, means ``[p, k, M]`` and co-moment matrices ``[q, k, M, M]`` of ``p`` per-row vector variables.

    ``comoment[j, t, a, b] = sum_r (x_r,i[t, a] - mean_i[t, a]) (x_r,l[t, b] - mean_l[t, b])`` for pair
    ``j = (i, l)``: :class:`~sensitivity.analyses.moments.Moments` with the cross products of the ``M`` elements
    of each of ``k`` kept positions; blocks join by Chan et al.'s update, exactly.
    """

    pairs: np.ndarray
    count: int
    mean: np.ndarray
    comoment: np.ndarray

    @classmethod
    def of(cls, block: np.ndarray, pairs: np.ndarray) -> CrossMoments:
        """The statistics of ``block [rows, p, k, M]``, in two passes over it."""
        x = np.asarray(block, dtype=np.float64)
        centre = x.mean(axis=0)
        dev = x - centre
        flat = np.ascontiguousarray(dev.transpose(1, 2, 0, 3))  # [p, k, rows, M]: BLAS products per pair
        comoment = np.stack([np.swapaxes(flat[i], 1, 2) @ flat[j] for i, j in pairs])
        return cls(pairs, len(x), centre, comoment)

    def merge(self, other: CrossMoments) -> CrossMoments:
        """The statistics of both sets of rows."""
        n = self.count + other.count
        delta = other.mean - self.mean
        cross = delta[self.pairs[:, 0], :, :, None] * delta[self.pairs[:, 1], :, None, :]
        return CrossMoments(self.pairs, n, self.mean + delta * (other.count / n),
                            self.comoment + other.comoment + cross * (self.count * other.count / n))


def analyze_model(
    model: Callable[[np.ndarray], np.ndarray],
    space: ParameterSpace,
    spec: OutputSpec,
    n: int,
    *,
    seed: Seed = None,
    over: Sequence[str] | None = None,
    weights: Weights = None,
    n_components: int = 3,
    intervals: IntervalPlan = RQMC,
    block: int = sobol_onepass.BLOCK_ROWS,
) -> xr.Dataset:
    """:func:`~sensitivity.analyses.indices.aggregated.analyze` of ``model`` on
    :func:`~sensitivity.analyses.indices.aggregated.sample` ``(space, n, seed=seed)``'s rows, in one pass.

    Parameters
    ----------
    model
        Values ``[rows, spec.size]`` at points ``[rows, d]`` in physical units (outputs flat in C order of
        ``spec``'s dims).
    space, spec, over, weights, n_components
        As :func:`~sensitivity.analyses.indices.aggregated.analyze`'s.
    n, seed
        Base rows (a power of two) and seed of the design; its scramblings are ``intervals``' replicates.
    intervals
        Randomised-QMC intervals over the scramblings, or none (bootstrap: refused, see the module docstring).
    block
        Base rows per model call, a power of two.
    """
    plan = intervals.check()
    if plan.kind == "bootstrap":
        raise ConfigError("the one-pass aggregated analysis makes randomised-QMC intervals or none, got `intervals` "
                          "= 'bootstrap' (analyze the design's values in memory for it)")
    if not isinstance(n_components, (int, np.integer)) or isinstance(n_components, bool) or n_components < 1:
        raise ConfigError(f"`n_components` must be an integer >= 1, got {n_components!r}")
    block = design.check_power_of_two(block, what="block", minimum=1)
    over = aggregated.resolve_over(spec, over)
    w = aggregated.output_weights(spec, over, weights)
    d, dependent = len(space), design.is_correlated(space)
    g = 2 * d if dependent else d
    replicates = plan.check_rows(n) if plan.kind == "rqmc" else 1
    (k, m_over), pairs = aggregated.layout(spec, over), pickfreeze.pairs(g, False)
    held = len(pairs) * (replicates + 1) * k * m_over**2
    if held > MATRIX_ELEMENTS:
        raise ConfigError(f"the one-pass PCA of {k} x {m_over} elements aggregated over {list(over)} holds {held:.3g} "
                          f"numbers (more than {MATRIX_ELEMENTS}): aggregate over fewer dims (`over`), or use "
                          "`intervals.method: bootstrap` (the design held in memory)")
    base, order = design.SobolBase(2 * d, n, seed, replicates), aggregated.element_order(spec, over)
    acc = pickfreeze.Accumulator(n, g, False, spec.size, replicates=replicates, tail_rows=0)
    per, parts = n // replicates, [None] * replicates
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        y = design.as_values(model(sobol_onepass.design_rows(space, base, lo, hi, dependent=dependent)))
        if y.shape[1] != spec.size:
            raise DataError(f"the model gave {y.shape[1]} outputs, its output description {spec.size}")
        blocks = y[:, order].reshape(hi - lo, g + 2, spec.size)
        acc.update(blocks)
        x = pickfreeze.variables(blocks, g).reshape(hi - lo, 2 * g + 2, k, m_over)
        for r in range(lo // per, -(-hi // per)):
            a, b = max(lo, r * per) - lo, min(hi, (r + 1) * per) - lo
            stats = CrossMoments.of(x[a:b], pairs)
            parts[r] = stats if parts[r] is None else parts[r].merge(stats)
    sets = [reduce(CrossMoments.merge, parts), *(parts if replicates > 1 else [])]
    pca = principal_components(sets, g, w.ravel(), min(n_components, m_over, 2 * n))
    return aggregated.indices_dataset(acc.replicate_estimates(), pca, space, spec, over, w, n, plan=plan,
                                      weights=weights)


def principal_components(sets: Sequence[CrossMoments], g: int, w: np.ndarray, c: int) -> dict[str, np.ndarray]:
    """The weighted PCA of the ``A``/``B`` rows from the pooled statistics ``sets[0]`` and every set's scores'
    first-order and total indices, in :func:`~sensitivity.analyses.indices.aggregated._principal_components`'
    layout (``explained``/``ratio`` ``[c, k]``, ``loading`` ``[c, k, M]``, ``S1``/``ST`` ``[K, g, k c]``)."""
    p, pool = g + 2, sets[0]
    n = pool.count
    centre, gap = (pool.mean[0] + pool.mean[p - 1]) / 2, pool.mean[0] - pool.mean[p - 1]
    scatter = pool.comoment[0] + pool.comoment[p - 1] + (n / 2) * gap[:, :, None] * gap[:, None, :]
    root = np.sqrt(w)
    power, vectors = np.linalg.eigh(root[:, None] * scatter * root[None, :] / (2 * n - 1))  # ascending, [k, M]
    power, vt = power[:, ::-1], np.swapaxes(vectors[:, :, ::-1], 1, 2)[:, :c]  # [k, M], [k, c, M]
    vt = vt * np.sign(np.take_along_axis(vt, np.argmax(np.abs(vt), axis=2)[:, :, None], axis=2))
    total = power.sum(axis=1, keepdims=True)
    ratio = power[:, :c] / np.where(total > 0, total, np.nan)
    scaled = vt * root  # [k, c, M]: score = (y - centre) . scaled
    shift = np.zeros_like(pool.mean)
    shift[:p] = centre  # the values are centred, the differences D_i are not
    mean = np.stack([np.einsum("kca,jka->jkc", scaled, s.mean - shift) for s in sets], 1)  # [p + g, K, k, c]
    comoment = np.stack([np.einsum("kca,jkab,kcb->jkc", scaled, s.comoment, scaled) for s in sets], 1)
    count = np.array([s.count for s in sets], dtype=np.float64)[:, None]
    reps = pickfreeze.estimates(mean.reshape(*mean.shape[:2], -1), comoment.reshape(*comoment.shape[:2], -1),
                                count, g, False)
    return {"explained": power[:, :c].T, "ratio": ratio.T, "loading": np.swapaxes(vt, 0, 1), "S1": reps["S1"],
            "ST": reps["ST"], "n": c}
