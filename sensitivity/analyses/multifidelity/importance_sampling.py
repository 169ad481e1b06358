"""Multifidelity importance sampling of a failure probability.

Peherstorfer, Cui, Marzouk & Willcox (2016), doi:10.1016/j.cma.2015.12.002: the surrogate's limit state on
a large sample of the nominal density ``p`` finds the failure region cheaply; a Gaussian mixture fitted to the
surrogate's failure points is the biasing density ``q``; the simulator then runs only on a small sample of
``q`` and its failure indicators are weighed by ``p/q``::

    Pf = (1/M) sum_j 1[g_sim(x_j) <= 0] p(x_j) / q(x_j),   x_j ~ q

unbiased for the *simulator's* failure probability whatever the surrogate's error, because ``q > 0``
everywhere (a Gaussian mixture has full support); the surrogate only decides how small the variance is. A
``defensive`` share ``lambda`` of the nominal density in ``q`` (Hesterberg 1995, doi:10.1080/00401706.1995.10484303)
bounds every weight by ``1 / lambda`` for when the surrogate misses part of the failure region.

Standard error: the sample standard deviation of the weighted indicators over ``sqrt(M)``; coefficient of
variation ``se / Pf``; interval ``Pf -+ z se`` (normal, clipped at 0). Failure is ``g <= 0``.
The mixture is fitted by expectation-maximisation (Dempster, Laird & Rubin 1977) from a seeded k-means++
start, with covariances regularised by a small multiple of their mean variance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.multifidelity import checks
from sensitivity.analyses.multifidelity.checks import Seed
from sensitivity.errors import ConfigError, DataError

#: ``limit_state(x [n, d]) -> [n]``; failure where the value is <= 0.
LimitState = Callable[[np.ndarray], np.ndarray]
#: ``sample(n, rng) -> [n, d]`` points of the nominal density.
Sampler = Callable[[int, np.random.Generator], np.ndarray]
#: ``logpdf(x [n, d]) -> [n]`` log density of the nominal distribution.
LogPdf = Callable[[np.ndarray], np.ndarray]

METHOD = "multifidelity importance sampling (Peherstorfer, Cui, Marzouk & Willcox 2016)"
REFERENCES = "doi:10.1016/j.cma.2015.12.002"


@dataclass(frozen=True)
class MFImportanceSampling:
    """Settings of :func:`failure_probability`.

    Parameters
    ----------
    n_surrogate
        Nominal points on which the surrogate's limit state is evaluated (>= 100).
    n_simulator
        Biased points on which the simulator runs (>= 2).
    components
        Gaussian components of the biasing mixture (>= 1; 1 is one Gaussian).
    defensive
        Share ``lambda`` of the nominal density in the biasing density, in [0, 1).
    min_failures
        Fewest surrogate failures to fit the mixture on (>= components (d + 1) is advised).
    em_iterations
        Expectation-maximisation iterations (>= 1).
    regularisation
        Added to every component's covariance: this multiple of its mean variance times the identity (>= 0).
    level
        Confidence level of the normal interval, in (0, 1).
    """

    n_surrogate: int = 100_000
    n_simulator: int = 500
    components: int = 1
    defensive: float = 0.0
    min_failures: int = 10
    em_iterations: int = 100
    regularisation: float = 1e-6
    level: float = 0.95

    def check(self) -> MFImportanceSampling:
        """These settings, or a :class:`~sensitivity.errors.ConfigError` naming the bad field."""
        checks.count(self.n_surrogate, "n_surrogate", 100)
        checks.count(self.n_simulator, "n_simulator", 2)
        checks.count(self.components, "components", 1)
        checks.count(self.min_failures, "min_failures", 2)
        checks.count(self.em_iterations, "em_iterations", 1)
        if not 0.0 <= self.defensive < 1.0:
            raise ConfigError(f"`defensive` must be in [0, 1), got {self.defensive}")
        if not (math.isfinite(self.regularisation) and self.regularisation >= 0):
            raise ConfigError(f"`regularisation` must be a finite number >= 0, got {self.regularisation}")
        checks.level(self.level)
        return self


@dataclass(frozen=True)
class GaussianMixture:
    """A Gaussian mixture density: ``weights [k]``, ``means [k, d]``, ``covariances [k, d, d]``."""

    weights: np.ndarray
    means: np.ndarray
    covariances: np.ndarray

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """``[n]`` log density at ``x [n, d]``."""
        return _logsumexp(np.log(self.weights)[None] + _component_logpdf(x, self.means, self.covariances), axis=1)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``[n, d]`` draws."""
        which = rng.choice(self.weights.size, size=n, p=self.weights)
        z = rng.standard_normal((n, self.means.shape[1]))
        chol = np.linalg.cholesky(self.covariances)
        return self.means[which] + np.einsum("nij,nj->ni", chol[which], z)


@dataclass(frozen=True)
class MFISResult:
    """A failure probability of the simulator by multifidelity importance sampling.

    Attributes
    ----------
    probability, standard_error, coefficient_of_variation
        ``Pf`` [1], its standard error [1] and ``se / Pf`` [1] (inf where ``Pf = 0``).
    interval
        ``[2]`` normal interval at ``level``, clipped at 0.
    surrogate_probability
        The surrogate's own failure fraction on the nominal sample (carries the surrogate's bias) [1].
    n_failures_surrogate, n_failures_simulator
        Failures of the surrogate on the nominal sample and of the simulator on the biased sample.
    effective_sample_size
        Kish's ``(sum w)^2 / sum w^2`` of the simulator's importance weights.
    points, log_weights, failed
        The biased sample ``[M, d]``, ``log p - log q`` there ``[M]`` and the simulator's failures ``[M]``.
    biasing
        The biasing Gaussian mixture (before the defensive share).
    """

    probability: float
    standard_error: float
    coefficient_of_variation: float
    interval: np.ndarray
    surrogate_probability: float
    n_failures_surrogate: int
    n_failures_simulator: int
    effective_sample_size: float
    points: np.ndarray
    log_weights: np.ndarray
    failed: np.ndarray
    biasing: GaussianMixture
    defensive: float
    level: float
    method: str = METHOD
    references: str = REFERENCES


def failure_probability(sim_limit_state: LimitState, sur_limit_state: LimitState, sample_nominal: Sampler,
                        nominal_logpdf: LogPdf, settings: MFImportanceSampling = MFImportanceSampling(), *,
                        seed: Seed = None) -> MFISResult:
    """The simulator's failure probability ``P[g_sim(X) <= 0]``, ``X ~ p``, by multifidelity importance sampling.

    Parameters
    ----------
    sim_limit_state, sur_limit_state
        ``g(x [n, d]) -> [n]`` of the simulator (run on ``n_simulator`` points) and of the surrogate
        (run on ``n_surrogate`` points); failure where ``g <= 0``.
    sample_nominal
        ``sample(n, rng) -> [n, d]`` draws of the nominal input density ``p``.
    nominal_logpdf
        ``logpdf(x [n, d]) -> [n]``, the log density of ``p``.
    settings
        Sample sizes, mixture, defensive share, level.
    seed
        Seed of every draw (int, Generator or None).

    Returns
    -------
    MFISResult
    """
    s = settings.check()
    rng = checks.rng(seed)
    x = _points(sample_nominal(s.n_surrogate, rng), s.n_surrogate, "sample_nominal")
    g_sur = _limit(sur_limit_state(x), s.n_surrogate, "sur_limit_state")
    failures = x[g_sur <= 0]
    if failures.shape[0] < s.min_failures:
        raise DataError(f"the surrogate failed at {failures.shape[0]} of {s.n_surrogate} nominal points, fewer than "
                        f"min_failures={s.min_failures}: raise `n_surrogate`")
    mixture = fit_mixture(failures, s.components, rng, iterations=s.em_iterations, regularisation=s.regularisation)
    n_nominal = rng.binomial(s.n_simulator, s.defensive) if s.defensive > 0 else 0
    z = np.concatenate([mixture.sample(s.n_simulator - n_nominal, rng),
                        _points(sample_nominal(n_nominal, rng), n_nominal, "sample_nominal") if n_nominal else
                        np.empty((0, x.shape[1]))])
    log_p = _limit(nominal_logpdf(z), z.shape[0], "nominal_logpdf")
    log_q = mixture.logpdf(z)
    if s.defensive > 0:
        log_q = np.logaddexp(math.log1p(-s.defensive) + log_q, math.log(s.defensive) + log_p)
    log_w = log_p - log_q
    failed = _limit(sim_limit_state(z), z.shape[0], "sim_limit_state") <= 0
    terms = np.where(failed, np.exp(log_w), 0.0)
    pf = float(terms.mean())
    se = float(terms.std(ddof=1) / math.sqrt(terms.size))
    zq = checks.z_value(s.level)
    w = np.exp(log_w - log_w.max())
    return MFISResult(
        probability=pf, standard_error=se, coefficient_of_variation=se / pf if pf > 0 else math.inf,
        interval=np.array([max(pf - zq * se, 0.0), pf + zq * se]),
        surrogate_probability=float(np.mean(g_sur <= 0)), n_failures_surrogate=int(failures.shape[0]),
        n_failures_simulator=int(failed.sum()), effective_sample_size=float(w.sum() ** 2 / (w**2).sum()),
        points=z, log_weights=log_w, failed=failed, biasing=mixture, defensive=s.defensive, level=s.level,
    )


def fit_mixture(x: np.ndarray, components: int, rng: np.random.Generator, *, iterations: int = 100,
                regularisation: float = 1e-6) -> GaussianMixture:
    """A Gaussian mixture of ``components`` fitted to points ``x [n, d]`` by EM from a k-means++ start."""
    n, d = x.shape
    k = min(components, n)
    ridge = lambda cov: cov + (regularisation * np.trace(cov) / d + 1e-300) * np.eye(d)  # noqa: E731
    if k == 1:
        return GaussianMixture(np.ones(1), x.mean(axis=0)[None], ridge(np.cov(x, rowvar=False).reshape(d, d))[None])
    centres = [x[rng.integers(n)]]
    for _ in range(1, k):
        dist = np.min([((x - c) ** 2).sum(axis=1) for c in centres], axis=0)
        centres.append(x[rng.choice(n, p=dist / dist.sum())] if dist.sum() > 0 else x[rng.integers(n)])
    means = np.array(centres)
    covs = np.repeat(ridge(np.cov(x, rowvar=False).reshape(d, d))[None], k, axis=0)
    weights = np.full(k, 1.0 / k)
    for _ in range(iterations):
        log_r = np.log(weights)[None] + _component_logpdf(x, means, covs)
        resp = np.exp(log_r - _logsumexp(log_r, axis=1)[:, None])
        nk = resp.sum(axis=0) + 1e-12
        weights = nk / n
        means = (resp.T @ x) / nk[:, None]
        centred = x[None] - means[:, None]
        covs = np.stack([ridge(np.einsum("n,ni,nj->ij", resp[:, j], centred[j], centred[j]) / nk[j]) for j in range(k)])
    return GaussianMixture(weights, means, covs)


def _component_logpdf(x: np.ndarray, means: np.ndarray, covs: np.ndarray) -> np.ndarray:
    """``[n, k]`` log density of every Gaussian component at ``x [n, d]``."""
    d = x.shape[1]
    chol = np.linalg.cholesky(covs)
    centred = x[None] - means[:, None]  # [k, n, d]
    z = np.linalg.solve(chol, np.swapaxes(centred, 1, 2))  # [k, d, n]
    log_det = 2 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    return (-0.5 * (z**2).sum(axis=1) - 0.5 * (log_det[:, None] + d * math.log(2 * math.pi))).T


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = a.max(axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.squeeze(top, axis=axis) + np.log(np.exp(a - top).sum(axis=axis))


def _points(x: np.ndarray, n: int, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != n or not np.isfinite(x).all():
        raise DataError(f"`{name}` must return [{n}, d] finite points, got shape {x.shape}")
    return x


def _limit(g: np.ndarray, n: int, name: str) -> np.ndarray:
    g = np.asarray(g, dtype=np.float64).reshape(-1) if np.ndim(g) == 2 and np.shape(g)[1] == 1 else np.asarray(g, float)
    if g.shape != (n,) or np.isnan(g).any():
        raise DataError(f"`{name}` must return [{n}] values without NaN, got shape {g.shape}")
    return g
