"""Statistics at the estimates: covariance, standard errors, identifiability, bands, distinct minima, bounds held.

A converged start is a *minimum* only where its cost lies within a likelihood-ratio region of the best fit
(:func:`minima_max_delta_cost`): a start held on a bound at a cost thousands of times the best is a rejected start.

The linear algebra (:func:`equilibrated_svd` and the functions of its result) takes a stack
``[K, m, n]`` of *weighted* (whitened) Jacobians ``J_w = W^{1/2} dF/dx`` — one per fit or per
sweep point — and works on all K at once with :mod:`numpy.linalg` gufuncs. Columns are equilibrated (scaled to unit
Euclidean norm) before the SVD, so ranks, condition numbers and identifiabilities
do not depend on the parameters' units; covariances are scaled back to physical
units afterwards. A stack entry that holds a non-finite number gives NaN results
for that entry only.

The covariance of a fit is ``(J^T W J + P^{-1})^{-1}`` (``P`` the prior covariance), times
``s^2 = chi^2 / (m_o - n)`` when the noise is unknown; ``aic = -2 ln L + 2 k`` and
``bic = -2 ln L + k ln m_o`` with the Gaussian log-likelihood of the data at the estimate.

References
----------
Doherty, J., and Hunt, R. J. (2009). Two statistics for evaluating parameter
identifiability and error reduction. Journal of Hydrology 366, 119-127.
https://doi.org/10.1016/j.jhydrol.2008.12.018

Akaike, H. (1974). A new look at the statistical model identification. IEEE Trans.
Automatic Control 19(6), 716-723. https://doi.org/10.1109/TAC.1974.1100705

Schwarz, G. (1978). Estimating the dimension of a model. Ann. Statist. 6(2),
461-464. https://doi.org/10.1214/aos/1176344136

Wilks, S. S. (1938). The large-sample distribution of the likelihood ratio for testing composite hypotheses.
Ann. Math. Statist. 9(1), 60-62. https://doi.org/10.1214/aoms/1177732360
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.analyses.calibration.iteration import Fits
from sensitivity.analyses.calibration.problem import Problem
from sensitivity.analyses.calibration.solvers import Status
from sensitivity.runtime.lazy import lazy_import

stats = lazy_import("scipy.stats")


#: :attr:`Posterior.error_status` values: standard errors defined; ``J_w`` rank-deficient at the
#: estimate; noise unknown without degrees of freedom (``m_observed <= n``).
SE_OK, SE_RANK_DEFICIENT, SE_NO_DEGREES_OF_FREEDOM = 0, 1, 2


@dataclass(frozen=True)
class EquilibratedSVD:
    """SVD of column-equilibrated weighted Jacobians ``J_w diag(1/scale) = U S V^T``.

    Attributes
    ----------
    scale
        ``[K, n]`` Euclidean norm of each column of ``J_w`` (1 where a column is zero),
        in weighted-output units per parameter unit.
    u
        ``[K, m, p]`` left singular vectors, ``p = min(m, n)``.
    singular_values
        ``[K, n]`` singular values, descending, padded with zeros when ``m < n``
        (dimensionless).
    vt
        ``[K, n, n]`` right singular vectors as rows (``vt[k, j]`` is direction j).
    """

    scale: np.ndarray
    u: np.ndarray
    singular_values: np.ndarray
    vt: np.ndarray

    def rank(self, rcond: float) -> np.ndarray:
        """``[K]`` numerical rank: singular values above ``rcond`` times the largest."""
        s = self.singular_values
        return np.sum(s > rcond * s[:, :1], axis=1) * np.all(np.isfinite(s), axis=1)

    def condition_number(self) -> np.ndarray:
        """``[K]`` ratio of largest to smallest singular value (inf when rank-deficient)."""
        s = self.singular_values
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = s[:, 0] / s[:, -1]
        return np.where(s[:, -1] > 0, ratio, np.where(np.isnan(s[:, 0]), np.nan, np.inf))


def equilibrated_svd(jacobian: np.ndarray) -> EquilibratedSVD:
    """Column-equilibrate and decompose a stack ``[K, m, n]`` of weighted Jacobians.

    Stack entries with a non-finite number get NaN factors instead of stopping the
    whole stack (LAPACK would raise).
    """
    jac = np.asarray(jacobian, dtype=float)
    k, m, n = jac.shape
    finite = np.all(np.isfinite(jac), axis=(1, 2))
    norms = np.linalg.norm(np.where(finite[:, None, None], jac, 0.0), axis=1)
    scale = np.where(norms > 0, norms, 1.0)
    p = min(m, n)
    u = np.full((k, m, p), np.nan)
    s = np.full((k, n), np.nan)
    vt = np.full((k, n, n), np.nan)
    if finite.any():
        scaled = jac[finite] / scale[finite, None, :]
        uu, ss, vv = np.linalg.svd(scaled, full_matrices=m < n)
        u[finite] = uu[:, :, :p]
        s[finite] = np.pad(ss, ((0, 0), (0, n - ss.shape[1])))
        vt[finite] = vv
    return EquilibratedSVD(scale=scale, u=u, singular_values=s, vt=vt)


def identifiability(svd: EquilibratedSVD, rank: np.ndarray) -> np.ndarray:
    """Per-parameter identifiability in [0, 1] (Doherty and Hunt, 2009).

    The squared norm of each parameter's unit vector projected onto the
    "solution space" spanned by the ``rank`` best-determined right singular
    vectors: ``id_i = sum_{j < rank} V_ij^2``. 1 means the data constrain the
    parameter on its own; 0 means it lies entirely in the null space; a value
    in between means it is only determined in combination with others (two
    parameters entering as a product get 0.5 each).

    Parameters
    ----------
    svd
        Output of :func:`equilibrated_svd` of the *data* Jacobians (without prior rows).
    rank
        ``[K]`` number of well-determined directions, e.g. ``svd.rank(rcond)``.

    Returns
    -------
    ``[K, n]`` identifiability (dimensionless).
    """
    n = svd.vt.shape[-1]
    keep = np.arange(n)[None, :] < rank[:, None]
    return np.einsum("kj,kji->ki", keep.astype(float), svd.vt**2)


def prior_scaled_identifiability(jacobian: np.ndarray, prior_std: np.ndarray) -> np.ndarray:
    """Per-parameter identifiability in [0, 1] relative to a prior (Doherty and Hunt, 2009).

    The parameters are scaled by their prior standard deviations, ``G = J_w diag(prior_std)``, and the solution
    space is spanned by the right singular vectors of ``G`` whose singular value is at least 1: the directions in
    which the data inform more than the prior does (exactly so for a diagonal prior). ``id_i = sum_{s_j >= 1}
    V_ij^2``: 1 when the data outweigh the prior on the parameter alone, 0 when they leave it to the prior,
    whatever its units; unlike :func:`identifiability`, a parameter that the data move by a tiny fraction of its
    prior width is not identifiable.

    Parameters
    ----------
    jacobian
        ``[K, m, n]`` whitened *data* Jacobians (without prior rows); an entry with a non-finite number gives NaN.
    prior_std
        ``[n]`` prior standard deviations, in the parameters' units.

    Returns
    -------
    ``[K, n]`` identifiability (dimensionless).
    """
    jac = np.asarray(jacobian, dtype=float)
    k, _, n = jac.shape
    finite = np.all(np.isfinite(jac), axis=(1, 2))
    out = np.full((k, n), np.nan)
    if finite.any():
        _, s, vt = np.linalg.svd(jac[finite] * np.asarray(prior_std, dtype=float), full_matrices=False)
        out[finite] = np.einsum("kj,kji->ki", (s >= 1.0).astype(float), vt**2)
    return out


def null_space(svd: EquilibratedSVD, rank: np.ndarray) -> np.ndarray:
    """``[K, n, n]`` parameter directions the data do not determine, in physical parameter units.

    Row ``j >= rank[k]`` of start ``k`` is the right singular vector ``v_j`` of the equilibrated
    ``J_w`` mapped back to parameters (``diag(1/scale) v_j``): a step along it leaves the linearised
    residuals unchanged, so only combinations orthogonal to it are identified (for ``y = a b x``:
    ``d(a, b) ~ (a, -b)``, only the product ``a b``). Each is scaled so that its largest component
    is +1; rows ``j < rank[k]`` are NaN.
    """
    k, n = svd.singular_values.shape
    directions = svd.vt / svd.scale[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        largest = np.take_along_axis(directions, np.argmax(np.abs(directions), axis=2)[:, :, None], axis=2)
        directions = directions / largest
    unresolved = np.arange(n)[None, :] >= rank[:, None]
    return np.where(unresolved[:, :, None], directions, np.nan)


def pseudo_inverse_covariance(svd: EquilibratedSVD, rank: np.ndarray) -> np.ndarray:
    """``[K, n, n]`` Moore-Penrose inverse of ``J_w^T J_w`` in physical units, truncated at ``rank``.

    Equals ``(J_w^T J_w)^{-1}`` when ``rank == n``. Computed from the SVD, never by
    forming and inverting the normal matrix, so the condition number is not squared.
    """
    s = svd.singular_values
    n = s.shape[-1]
    keep = np.arange(n)[None, :] < rank[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_s2 = np.where(keep, 1.0 / s**2, 0.0)
    scaled = np.einsum("kji,kj,kjl->kil", svd.vt, inv_s2, svd.vt)
    return scaled / (svd.scale[:, :, None] * svd.scale[:, None, :])


def correlation(covariance: np.ndarray) -> np.ndarray:
    """``[K, n, n]`` correlation matrices of a stack of covariances (NaN where a variance is 0)."""
    sd = np.sqrt(np.einsum("kii->ki", covariance))
    with np.errstate(divide="ignore", invalid="ignore"):
        return covariance / (sd[:, :, None] * sd[:, None, :])


def delta_method_std(jacobian: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """``[K, m]`` standard deviation of model outputs, ``sqrt(diag(J C J^T))`` (delta method).

    Parameters
    ----------
    jacobian
        ``[K, m, n]`` *unweighted* Jacobian of the outputs, output units per parameter unit.
    covariance
        ``[K, n, n]`` parameter covariance in parameter units squared.

    Returns
    -------
    Standard deviations in output units.
    """
    var = np.einsum("kmi,kij,kmj->km", jacobian, covariance, jacobian)
    return np.sqrt(np.maximum(var, 0.0))


@dataclass(frozen=True)
class Posterior:
    """Per-start statistics at the final estimates (physical units)."""

    chi2: np.ndarray
    dof: int
    n_observed: int
    known_noise: bool
    residual_variance: np.ndarray
    covariance: np.ndarray
    band_covariance: np.ndarray
    rank: np.ndarray
    data_svd: EquilibratedSVD
    data_rank: np.ndarray
    identifiability: np.ndarray
    condition_number: np.ndarray
    neg2_log_likelihood: np.ndarray
    n_fitted: int
    null_space: np.ndarray

    @property
    def standard_error(self) -> np.ndarray:
        """``[K, n]`` square roots of the covariance's diagonal (NaN when rank-deficient)."""
        return np.sqrt(np.einsum("kii->ki", self.covariance))

    @property
    def error_status(self) -> np.ndarray:
        """``[K]`` why standard errors are undefined: :data:`SE_OK`, :data:`SE_RANK_DEFICIENT`
        (``J_w`` of rank < n at the estimate: some parameter combinations are not identified) or
        :data:`SE_NO_DEGREES_OF_FREEDOM` (noise unknown and ``m_observed <= n``: no residual variance)."""
        n = self.covariance.shape[-1]
        no_dof = not self.known_noise and self.dof <= 0
        return np.where(self.rank < n, SE_RANK_DEFICIENT, SE_NO_DEGREES_OF_FREEDOM if no_dof else SE_OK).astype(np.int8)

    @property
    def reduced_chi2(self) -> np.ndarray:
        """``[K]`` ``chi2 / (m_o - n)`` (NaN without degrees of freedom)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.chi2 / self.dof if self.dof > 0 else np.full(self.chi2.shape, np.nan)

    @property
    def aic(self) -> np.ndarray:
        """``[K]`` Akaike information criterion ``-2 ln L + 2 k``."""
        return self.neg2_log_likelihood + 2 * self.n_fitted

    @property
    def bic(self) -> np.ndarray:
        """``[K]`` Bayesian information criterion ``-2 ln L + k ln m_o``."""
        return self.neg2_log_likelihood + self.n_fitted * np.log(self.n_observed)

    def quantile(self, level: float) -> float:
        """Two-sided quantile of probability ``level``: normal for known noise, Student t with ``m_o - n``
        degrees of freedom when the noise variance was estimated."""
        return stats.norm.ppf(0.5 + level / 2) if self.known_noise else stats.t.ppf(0.5 + level / 2, self.dof)


def posterior(problem: Problem, fits: Fits, rcond: float) -> Posterior:
    """Covariance, rank, identifiability and likelihood of every start at its final estimate."""
    obs = problem.observations
    m_o, n = obs.n_observed, problem.n
    usable = fits.status != Status.NON_FINITE
    jx = np.where(usable[:, None, None], fits.jx, np.nan)
    chi2 = np.where(usable, np.sum(fits.r[:, :m_o] ** 2, axis=1), np.nan)
    dof = m_o - n
    if obs.known_noise:
        s2 = np.ones_like(chi2)
        neg2 = chi2 + m_o * np.log(2 * np.pi) + obs.log_det_cov
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            s2 = chi2 / dof if dof > 0 else np.full_like(chi2, np.nan)
            neg2 = m_o * (np.log(2 * np.pi * chi2 / m_o) + 1.0)
    full_svd = equilibrated_svd(jx)
    rank = full_svd.rank(rcond)
    band_cov = pseudo_inverse_covariance(full_svd, rank) * s2[:, None, None]
    covariance = np.where((rank == n)[:, None, None], band_cov, np.nan)
    data_svd = full_svd if problem.prior_whitening is None else equilibrated_svd(jx[:, :m_o])
    data_rank = data_svd.rank(rcond)
    if problem.prior_whitening is None:
        ident = identifiability(data_svd, data_rank)
    else:  # relative to the prior: what the data add to it
        ident = prior_scaled_identifiability(jx[:, :m_o], np.sqrt(np.diag(problem.prior_covariance)))
    return Posterior(chi2=chi2, dof=dof, n_observed=m_o, known_noise=obs.known_noise, residual_variance=s2,
                     covariance=covariance, band_covariance=band_cov, rank=rank, data_svd=data_svd,
                     data_rank=data_rank, identifiability=ident,
                     condition_number=data_svd.condition_number(), neg2_log_likelihood=neg2,
                     n_fitted=n + (0 if obs.known_noise else 1), null_space=null_space(full_svd, rank))


def minimum_points(estimate: np.ndarray, cost: np.ndarray, label: np.ndarray) -> np.ndarray:
    """``[M, n]`` the lowest-cost estimate of each distinct minimum (``label`` of :func:`distinct_minima`, minima
    numbered by increasing cost), best first."""
    found = [np.flatnonzero(label == k)[np.argmin(cost[label == k])] for k in range(int(label.max()) + 1)]
    return np.asarray(estimate)[found].reshape(-1, np.shape(estimate)[-1])


#: :func:`distinct_minima`'s label of a converged start whose cost lies beyond the region of the best fit.
REJECTED = -2


def minima_max_delta_cost(level: float, n: int, post: Posterior, cost: np.ndarray, ok: np.ndarray) -> float:
    """The largest cost above the best fit's at which a converged start still counts as a minimum.

    ``chi2.ppf(level, n) / 2``: the boundary of the likelihood-ratio confidence region of probability ``level``
    about the best fit, ``2 (cost - cost_best) <= chi2_n(level)`` (Wilks 1938), in the cost's units (half the
    chi-square). With unknown noise the cost is in squared output units and the bound is scaled by the best fit's
    residual variance ``s^2 = chi2 / (m_o - n)``; without degrees of freedom there is no scale and every
    converged start is a minimum (``inf``).

    Parameters
    ----------
    level
        Probability of the region (dimensionless, in (0, 1)).
    n
        Number of fitted parameters.
    post
        The statistics at the estimates (for ``s^2``).
    cost, ok
        ``[K]`` final costs and the starts that count (the best fit is the lowest of them).
    """
    if not ok.any():
        return np.inf
    scale = 1.0 if post.known_noise else float(post.residual_variance[np.flatnonzero(ok)[np.argmin(cost[ok])]])
    bound = 0.5 * float(stats.chi2.ppf(level, n)) * scale
    return bound if np.isfinite(bound) else np.inf


def distinct_minima(estimates: np.ndarray, cost: np.ndarray, ok: np.ndarray, rtol: float,
                    scale: np.ndarray | None = None, max_delta_cost: float = np.inf) -> np.ndarray:
    """Label each start with the index of its minimum, minima numbered by increasing cost.

    A start whose cost lies more than ``max_delta_cost`` above the best is not a minimum that fits: it is
    labeled :data:`REJECTED` (see :func:`minima_max_delta_cost`). Two of the others belong to the same minimum when
    every parameter agrees within ``rtol`` times the larger of their magnitudes and the parameter's ``scale`` (its
    bounds' width), so that estimates near zero (a log-conductivity of 0.0006) group as well as large ones. Greedy
    in order of cost: the lowest-cost start not yet labeled founds a minimum and takes every unlabeled start that
    agrees with it (cost ``O(K x minima)``).

    Parameters
    ----------
    estimates
        ``[K, n]`` final parameter values.
    cost
        ``[K]`` final costs.
    ok
        ``[K]`` bool, starts to cluster (others get -1).
    rtol
        Relative tolerance (dimensionless).
    scale
        ``[n]`` a parameter's own scale, in its units (0: the magnitudes alone); None: zeros.
    max_delta_cost
        Largest cost above the best at which a start is a minimum, in the cost's units (inf: every start).

    Returns
    -------
    ``[K]`` int minimum index, -1 for starts not clustered, :data:`REJECTED` for those too far above the best.
    """
    labels = np.full(cost.shape, -1, dtype=np.int32)
    if ok.any():
        labels[ok & (cost > np.min(cost[ok]) + max_delta_cost)] = REJECTED
    pending = np.flatnonzero(ok & (labels == -1))
    pending = pending[np.argsort(cost[pending], kind="stable")]
    while pending.size:
        founder = estimates[pending[0]]
        rest = estimates[pending]
        size = np.maximum(np.maximum(np.abs(rest), np.abs(founder)), 0.0 if scale is None else scale)
        close = np.all(np.abs(rest - founder) <= rtol * size, axis=1)
        close[0] = True
        labels[pending[close]] = labels.max() + 1
        pending = pending[~close]
    return labels


def parameter_interval(estimate: np.ndarray, se: np.ndarray, log_mask: np.ndarray, q: float) -> np.ndarray:
    """``[K, n, 2]`` estimate -/+ q se; for log parameters ``x exp(-/+ q se / x)`` (symmetric in log x)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # x = 0 only where not log: unused
        factor = np.exp(q * se / estimate)
        low = np.where(log_mask, estimate / factor, estimate - q * se)
        high = np.where(log_mask, estimate * factor, estimate + q * se)
    return np.stack([low, high], axis=-1)


def at_bound(problem: Problem, estimate: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """``[K, n]`` int8: -1 where an estimate sits on its lower bound, 1 on its upper, 0 inside (or NaN), within
    ``rtol`` of the bounds' width in the solver's variables (log for log parameters), where the solver holds it."""
    z = problem.to_internal(np.where(np.isfinite(estimate), estimate, 1.0))
    width = np.where(np.isfinite(problem.upper - problem.lower), problem.upper - problem.lower, 1.0)
    low = np.isfinite(estimate) & (z - problem.lower <= rtol * width)
    high = np.isfinite(estimate) & (problem.upper - z <= rtol * width)
    return np.where(low, -1, np.where(high, 1, 0)).astype(np.int8)
