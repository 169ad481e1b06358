"""Input uncertainty for propagation: distributions, their moments, and (randomised quasi-) Monte Carlo sampling.

Two kinds of joint input distribution share one interface, :class:`InputUncertainty`:

* :class:`CopulaInputs` (from a :class:`~sensitivity.inputs.space.ParameterSpace`): each parameter follows its
  own marginal (any continuous scipy.stats distribution, optionally truncated; see :mod:`sensitivity.inputs.marginals`),
  sampled through its quantile functions, and the dependence is a Gaussian
  copula with the space's correlation matrix ``R`` (independent when the space has none).
* :class:`GaussianInputs` (from a mean and covariance, e.g. a calibration posterior): multivariate normal.
  :func:`truncated_gaussian_inputs` keeps such a Gaussian inside the bounds, as a :class:`CopulaInputs`
  of truncated-normal marginals with the Gaussian's correlation.

Both map standard normal vectors ``z`` to physical points, so every sampler shares one path:
``u`` in the unit cube (scrambled Sobol or pseudo-random) -> ``z = Phi^-1(u)`` -> physical ``x``.

Moments of :class:`CopulaInputs` (the ``mean`` and ``covariance`` used by the delta methods and the
unscented transform) are exact, not sampled: the means and variances are the marginals' own, and the
Pearson correlation of parameters ``i, j`` under the copula,
``E[g_i(Z_1) g_j(r Z_1 + sqrt(1 - r^2) Z_2)]`` with ``g = (F^-1(Phi(z)) - mean) / std``, is a
two-dimensional Gauss-Hermite quadrature (96 x 96 nodes). It equals ``r`` for normal marginals and
differs from ``r`` otherwise, e.g. ``(6 / pi) arcsin(r / 2)`` for uniform marginals (Kruskal 1958).

References
----------
Nelsen, R. B. (2006), An Introduction to Copulas, 2nd ed., Springer, doi:10.1007/0-387-28678-0.
Kruskal, W. H. (1958), Ordinal measures of association, JASA 53, 814-861, doi:10.1080/01621459.1958.10501481.
Owen, A. B. (1997), Scrambled net variance for integrals of smooth functions, Ann. Stat. 25, 1541-1562,
doi:10.1214/aos/1031594731.
"""
from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Literal, Sequence

import numpy as np

from sensitivity.inputs.covariance import checked_covariance
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import Distribution, ParameterSpace
from sensitivity.inputs.quantiles import quantile_from_normal

special = lazy_import("scipy.special")
qmc = lazy_import("scipy.stats.qmc")

Sampler = Literal["sobol", "random"]
SAMPLERS: tuple[str, ...] = ("sobol", "random")

#: Unit-cube points are clipped to [U_MIN, 1 - U_MIN] so that Phi^-1 stays finite (|z| <= 8.2).
_U_MIN = 2.0**-53
#: Gauss-Hermite nodes per dimension for the copula's Pearson correlations.
_HERMITE_NODES = 96


@dataclass(frozen=True)
class InputUncertainty(ABC):
    """A joint distribution of the ``n`` model inputs, in physical units.

    Attributes
    ----------
    names
        Parameter names, in the model's input order.
    units
        UDUNITS-2 units per parameter, or None.
    mean
        ``[n]`` mean of the inputs [parameter units].
    covariance
        ``[n, n]`` covariance of the inputs [units_i * units_j], positive definite.
    bounds
        ``[n, 2]`` (low, high) of the surrogate's domain, or None; used to report how many model
        evaluations fall outside it.
    """

    names: tuple[str, ...]
    units: tuple[str, ...] | None
    mean: np.ndarray
    covariance: np.ndarray
    bounds: np.ndarray | None

    @property
    def n(self) -> int:
        """Number of inputs."""
        return len(self.names)

    @property
    @abstractmethod
    def description(self) -> str:
        """One line naming the distribution, for dataset attributes."""

    @abstractmethod
    def from_standard_normal(self, z: np.ndarray) -> np.ndarray:
        """Map ``[N, n]`` independent standard normal draws to ``[N, n]`` physical points."""

    def from_unit_cube(self, u: np.ndarray) -> np.ndarray:
        """Map ``[N, n]`` points of the unit cube (uniform, independent) to ``[N, n]`` physical points."""
        return self.from_standard_normal(special.ndtri(np.clip(u, _U_MIN, 1.0 - _U_MIN)))

    def sample(self, n_points: int, *, seed: int | np.random.Generator | None = None,
               sampler: Sampler = "sobol") -> np.ndarray:
        """Draw ``[n_points, n]`` input points: one scrambled Sobol sequence or pseudo-random.

        Parameters
        ----------
        n_points
            Number of points; a power of 2 for ``sampler="sobol"`` (balance of the net).
        seed
            Seed or generator of the scrambling / pseudo-random draws.
        sampler
            ``"sobol"`` (randomised QMC, Owen-scrambled) or ``"random"`` (plain Monte Carlo).
        """
        rng = np.random.default_rng(seed)
        return self.from_unit_cube(next(unit_cube_blocks(n_points, self.n, n_points, sampler, rng)))

    def outside_bounds(self, x: np.ndarray) -> np.ndarray:
        """``[N]`` mask of the points with any parameter outside ``bounds`` (all False without bounds)."""
        if self.bounds is None:
            return np.zeros(len(x), dtype=bool)
        return ((x < self.bounds[:, 0]) | (x > self.bounds[:, 1])).any(axis=1)


@dataclass(frozen=True)
class GaussianInputs(InputUncertainty):
    """Multivariate normal inputs ``N(mean, covariance)``; build with :func:`gaussian_inputs`."""

    cholesky: np.ndarray = field(repr=False)

    @property
    def description(self) -> str:
        return "multivariate normal (mean, covariance)"

    def from_standard_normal(self, z: np.ndarray) -> np.ndarray:
        return self.mean + z @ self.cholesky.T


@dataclass(frozen=True)
class CopulaInputs(InputUncertainty):
    """Marginals of a :class:`ParameterSpace` joined by a Gaussian copula; build with :func:`inputs_from_space`."""

    marginals: tuple[Any, ...] = field(repr=False)
    copula_cholesky: np.ndarray | None = field(repr=False)

    @property
    def description(self) -> str:
        runs = [(kind, len(list(run))) for kind, run in itertools.groupby(m.dist.name for m in self.marginals)]
        kinds = ", ".join(kind if count == 1 else f"{kind} x {count}" for kind, count in runs)  # uniform x 64
        copula = "independent" if self.copula_cholesky is None else "Gaussian copula"
        return f"marginals ({kinds}), {copula}"

    def from_standard_normal(self, z: np.ndarray) -> np.ndarray:
        if self.copula_cholesky is not None:
            z = z @ self.copula_cholesky.T
        return np.column_stack([quantile_from_normal(m, z[:, i]) for i, m in enumerate(self.marginals)])


def gaussian_inputs(
    mean: Sequence[float] | np.ndarray,
    covariance: Sequence[Sequence[float]] | np.ndarray,
    *,
    space: ParameterSpace | None = None,
    names: Sequence[str] | None = None,
    units: Sequence[str] | None = None,
) -> GaussianInputs:
    """Multivariate normal inputs, e.g. the estimate and covariance of a calibration.

    Parameters
    ----------
    mean
        ``[n]`` mean [parameter units].
    covariance
        ``[n, n]`` symmetric positive definite covariance [units_i * units_j].
    space
        Optional parameter space: supplies names, units and bounds, and the mean must lie inside
        the bounds.
    names, units
        Labels when no ``space`` is given (default ``x0 .. x{n-1}``, no units).

    Raises
    ------
    ConfigError
        Wrong shapes, non-finite values, a covariance that is not symmetric positive definite, or
        a mean outside the space's bounds.
    """
    mu = _checked_vector(mean, "mean")
    n = mu.size
    if space is not None:
        if len(space) != n:
            raise ConfigError(f"`mean` has {n} entries but the space has {len(space)} parameters")
        names, units, bounds = space.names, space.units, space.bounds
        _check_inside(mu, bounds, space.names)
    else:
        names = [f"x{i}" for i in range(n)] if names is None else list(names)
        bounds = None
        for what, labels in (("names", names), ("units", units)):
            if labels is not None and len(labels) != n:
                raise ConfigError(f"`{what}` must have {n} entries (one per mean), got {len(labels)}")
    cov, chol = checked_covariance(covariance, n, "`covariance`")
    return GaussianInputs(tuple(names), None if units is None else tuple(units), mu, cov, bounds, cholesky=chol)


def inputs_from_space(space: ParameterSpace) -> CopulaInputs:
    """The space's marginals joined by a Gaussian copula with its correlation (independent if none).

    The mean and covariance are exact (see the module notes). The mean must lie inside the bounds
    (a normal or lognormal marginal may have its mean outside them).
    """
    marginals = tuple(p.frozen_distribution() for p in space.parameters)
    mean = np.array([m.mean() for m in marginals], dtype=float)
    std = np.array([m.std() for m in marginals], dtype=float)
    for name, m, s in zip(space.names, mean, std):
        if not (np.isfinite(m) and np.isfinite(s)):
            raise ConfigError(f"parameter {name!r}: its distribution has no finite mean and variance "
                              f"(got {m}, {s**2}); truncate it (`truncate: [low, high]`) or choose another")
    _check_inside(mean, space.bounds, space.names)
    corr = np.eye(len(space)) if space.correlation is None else pearson_under_copula(marginals, space.correlation)
    copula_chol = None if space.correlation is None else np.linalg.cholesky(space.correlation)
    return CopulaInputs(tuple(space.names), tuple(space.units), mean, corr * np.outer(std, std), space.bounds,
                        marginals=marginals, copula_cholesky=copula_chol)


def truncated_gaussian_inputs(
    mean: Sequence[float] | np.ndarray,
    covariance: Sequence[Sequence[float]] | np.ndarray,
    space: ParameterSpace,
) -> CopulaInputs:
    """``N(mean, covariance)`` kept inside the space's bounds, e.g. a broad calibration posterior.

    Each parameter follows ``N(mean_i, S_ii)`` truncated to its bounds, and the dependence is a
    Gaussian copula with the correlation of ``S``. Without truncation (bounds far from the mean)
    this is exactly ``N(mean, S)``; with it, the marginals are exact truncated normals while the
    joint law approximates the truncated multivariate normal (whose marginals are not truncated
    normals when parameters are correlated). Every sample lies inside the bounds, where the
    surrogate is valid; the mean and covariance (exact, see the module notes) move inward.

    Parameters
    ----------
    mean
        ``[n]`` mean before truncation [parameter units], inside the bounds.
    covariance
        ``[n, n]`` symmetric positive definite covariance before truncation [units_i * units_j].
    space
        Names, units and bounds, in the order of ``mean``.

    Raises
    ------
    ConfigError
        As :func:`gaussian_inputs`.
    """
    mu = _checked_vector(mean, "mean")
    if len(space) != mu.size:
        raise ConfigError(f"`mean` has {mu.size} entries but the space has {len(space)} parameters")
    _check_inside(mu, space.bounds, space.names)
    cov, _ = checked_covariance(covariance, mu.size, "`covariance`")
    std = np.sqrt(np.diag(cov))
    parameters = [replace(p, distribution=Distribution("truncnormal", {"mean": float(m), "std": float(s)}))
                  for p, m, s in zip(space.parameters, mu, std)]
    return inputs_from_space(ParameterSpace(tuple(parameters), cov / np.outer(std, std)))


def pearson_under_copula(marginals: Sequence[Any], copula_correlation: np.ndarray) -> np.ndarray:
    """``[n, n]`` Pearson correlation of the inputs under a Gaussian copula, by Gauss-Hermite quadrature.

    Parameters
    ----------
    marginals
        Frozen :mod:`scipy.stats` marginals with finite variance.
    copula_correlation
        ``[n, n]`` correlation ``R`` of the underlying normal vector.
    """
    nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
    weights = weights / math.sqrt(2.0 * math.pi)  # expectation under N(0, 1)

    def standardised(m: Any, z: np.ndarray) -> np.ndarray:
        return (quantile_from_normal(m, z) - m.mean()) / m.std()

    n = len(marginals)
    corr = np.eye(n)
    for i in range(n):
        g_i = standardised(marginals[i], nodes)
        for j in range(i + 1, n):
            r = copula_correlation[i, j]
            if r == 0.0:
                continue
            z_j = r * nodes[:, None] + math.sqrt(1.0 - r * r) * nodes[None, :]
            g_j = standardised(marginals[j], z_j.ravel()).reshape(z_j.shape)
            corr[i, j] = corr[j, i] = weights @ (g_i[:, None] * g_j) @ weights
    return corr


def unit_cube_blocks(n_points: int, d: int, block_size: int, sampler: Sampler,
                     rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Yield ``n_points`` points of one randomised sequence in ``[0, 1)^d``, ``block_size`` at a time.

    ``"sobol"`` draws one Owen-scrambled Sobol sequence (``n_points`` and ``block_size`` powers of 2,
    so every block is a balanced piece of the net); ``"random"`` draws independent uniforms.
    """
    if sampler not in SAMPLERS:
        raise ConfigError(f"`sampler` must be one of {SAMPLERS}, got {sampler!r}")
    for name, value in (("n_points", n_points), ("block_size", block_size)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"`{name}` must be a positive integer, got {value!r}")
        if sampler == "sobol" and value & (value - 1):
            raise ConfigError(f"`{name}` must be a power of 2 for sampler 'sobol', got {value}")
    engine = qmc.Sobol(d, scramble=True, rng=rng) if sampler == "sobol" else None
    for start in range(0, n_points, block_size):
        rows = min(block_size, n_points - start)
        yield engine.random(rows) if engine is not None else rng.random((rows, d))


def _checked_vector(values: Any, what: str) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ConfigError(f"`{what}` must be a non-empty vector, got shape {list(v.shape)}")
    if not np.isfinite(v).all():
        raise ConfigError(f"`{what}` must be finite, got {v.tolist()}")
    return v


def _check_inside(mean: np.ndarray, bounds: np.ndarray, names: Sequence[str]) -> None:
    outside = (mean < bounds[:, 0]) | (mean > bounds[:, 1])
    if outside.any():
        i = int(np.argmax(outside))
        raise ConfigError(
            f"input mean of {names[i]!r} = {mean[i]:.6g} is outside its bounds [{bounds[i, 0]}, {bounds[i, 1]}]"
        )


# ----------------------------------------------------------------------------- posterior draws


@dataclass(frozen=True)
class DrawInputs(InputUncertainty):
    """The empirical distribution of ``[N, n]`` draws; build with :func:`draws_inputs`."""

    draws: np.ndarray = field(repr=False)

    @property
    def description(self) -> str:
        return f"empirical distribution of {len(self.draws)} posterior draws"

    def from_unit_cube(self, u: np.ndarray) -> np.ndarray:
        index = np.minimum((np.asarray(u)[:, 0] * len(self.draws)).astype(np.int64), len(self.draws) - 1)
        return self.draws[index]

    def from_standard_normal(self, z: np.ndarray) -> np.ndarray:
        return self.from_unit_cube(special.ndtr(np.asarray(z)))


def draws_inputs(draws: np.ndarray, names: Sequence[str], units: Sequence[str] | None = None,
                 bounds: np.ndarray | None = None) -> DrawInputs:
    """Inputs from ``[N, n]`` finite draws (e.g. ``posterior.nc``'s ``draws`` stacked over chains)."""
    x = np.asarray(draws, float)
    if x.ndim != 2 or x.shape[1] != len(names) or len(x) < x.shape[1] + 1:
        raise ConfigError(f"`draws` must have shape [N > {len(names)}, {len(names)}], got {list(x.shape)}")
    if not np.all(np.isfinite(x)):
        raise ConfigError("`draws` must be finite")
    cov = np.cov(x, rowvar=False).reshape(x.shape[1], x.shape[1])
    if np.linalg.eigvalsh(cov).min() <= 0:
        raise ConfigError("`draws`: their covariance is singular (constant or collinear parameters)")
    return DrawInputs(tuple(names), None if units is None else tuple(units), x.mean(axis=0), cov,
                      None if bounds is None else np.asarray(bounds, float), draws=x)
