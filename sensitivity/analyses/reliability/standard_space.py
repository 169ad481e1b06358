"""The Nataf transform between physical inputs ``x`` and the standard normal space ``u``.

Independent marginals ``F_i`` (scipy frozen continuous distributions; a truncated marginal is a frozen
distribution too, e.g. ``scipy.stats.truncnorm``) joined by a Gaussian copula whose correlation matrix ``R``
is that of the normal scores ``z_i = Phi^-1(F_i(x_i))``:

``x = F^-1(Phi(L u))``,  ``u = L^-1 Phi^-1(F(x))``,  ``L L^T = R`` (Cholesky, lower),

so ``u ~ N(0, I)`` exactly. ``R`` is taken as given: no fitting of ``R`` to a correlation of ``x`` (Nataf's
integral equation) is made here. The Jacobian ``dx/du = diag(phi(z) / f(x)) L`` is evaluated in log space,
and every ``Phi`` / ``Phi^-1`` of a positive score goes through ``norm.sf`` / ``norm.isf`` and the marginal's
``sf`` / ``isf``, so that points ~8 standard deviations out in either tail keep their relative accuracy.

Second derivatives: each ``x_i`` depends on ``u`` only through its own score ``z_i = L_i . u``, with
``s_i = dx_i/dz_i = phi(z_i) / f_i(x_i)`` and, differentiating once more,

``d2x_i/dz_i^2 = -s_i (z_i + s_i d log f_i / dx)``,

so a function ``g(x(u))`` has the Hessian in ``u``

``H_u = J^T H_x J + sum_i (dg/dx_i) (d2x_i/dz_i^2) L_i^T L_i``,  ``J = dx/du``

(:meth:`Nataf.pull_back_hessian`). scipy gives no derivative of ``log f``: the score ``d log f / dx`` is the
fourth-order central difference of ``logpdf`` with the step ``h_i = 1e-3 s_i`` (a step of ``1e-3`` in
``z_i``, so it scales with the marginal and stays inside a bounded support for ``|z| < 500``), relative error
``~1e-10``. It is exactly 0 for a uniform law and ``-(x - mu) / sigma^2`` for a normal one.

References
----------
Liu, P.-L. & Der Kiureghian, A. (1986), Multivariate distribution models with prescribed marginals and
covariances, Probabilistic Engineering Mechanics 1(2), 105-112, doi:10.1016/0266-8920(86)90033-0.
Lebrun, R. & Dutfoy, A. (2009), An innovating analysis of the Nataf transformation from the copula viewpoint,
Probabilistic Engineering Mechanics 24(3), 312-320, doi:10.1016/j.probengmech.2008.08.001.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

special = lazy_import("scipy.special")
stats = lazy_import("scipy.stats")

#: ``log sqrt(2 pi)``: ``log phi(z) = -z^2 / 2 - LOG_SQRT_2PI``, the standard normal's log density as
#: ``scipy.stats.norm.logpdf`` computes it, without its per-call cost.
LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)

#: ``points [K, n] -> (values [K, ...], gradients [K, ..., n])``, batched.
GradientFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Nataf:
    """The Nataf transform of independent marginals under a Gaussian copula.

    Parameters
    ----------
    marginals
        One scipy frozen continuous distribution per input, in the inputs' order and units.
    correlation
        ``[n, n]`` correlation matrix of the normal scores (symmetric, unit diagonal, positive definite),
        or None for independent inputs.
    """

    marginals: tuple[Any, ...]
    correlation: np.ndarray | None = None
    _cholesky: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        marginals = tuple(self.marginals)
        if not marginals:
            raise ConfigError("`marginals` must hold at least one distribution, got none")
        for i, marginal in enumerate(marginals):
            if not (hasattr(marginal, "dist") and isinstance(marginal.dist, stats.rv_continuous)):
                raise ConfigError(f"`marginals[{i}]` must be a frozen scipy continuous distribution, got {marginal!r}")
        object.__setattr__(self, "marginals", marginals)
        n = len(marginals)
        if self.correlation is None:
            object.__setattr__(self, "_cholesky", np.eye(n))
            return
        r = np.array(self.correlation, dtype=float)
        if r.shape != (n, n):
            raise ConfigError(f"`correlation` must be [{n}, {n}] for {n} marginals, got shape {r.shape}")
        if not np.all(np.isfinite(r)) or not np.allclose(r, r.T, atol=1e-12) or not np.allclose(np.diag(r), 1.0):
            raise ConfigError("`correlation` must be finite, symmetric with a unit diagonal, got "
                              f"{np.array2string(r, precision=3, separator=',')}")
        try:
            chol = np.linalg.cholesky(r)
        except np.linalg.LinAlgError:
            raise ConfigError("`correlation` must be positive definite, got one with smallest eigenvalue "
                              f"{np.linalg.eigvalsh(r)[0]:.3g}") from None
        r.setflags(write=False)
        object.__setattr__(self, "correlation", r)
        object.__setattr__(self, "_cholesky", chol)

    @property
    def n(self) -> int:
        """Number of inputs."""
        return len(self.marginals)

    @property
    def cholesky(self) -> np.ndarray:
        """``L`` with ``L L^T = R``, ``[n, n]`` lower triangular (a copy)."""
        return self._cholesky.copy()

    def _points(self, points: np.ndarray, name: str) -> np.ndarray:
        a = np.asarray(points, dtype=float)
        if a.ndim != 2 or a.shape[1] != self.n:
            raise ConfigError(f"`{name}` must be [K, {self.n}], got shape {a.shape}")
        return a

    def to_physical(self, u: np.ndarray) -> np.ndarray:
        """``x = F^-1(Phi(L u))`` for ``u [K, n]`` -> ``x [K, n]`` (inputs' units)."""
        z = self._points(u, "u") @ self._cholesky.T
        x = np.empty_like(z)
        for i, marginal in enumerate(self.marginals):
            zi, low = z[:, i], z[:, i] <= 0
            x[low, i] = marginal.ppf(special.ndtr(zi[low]))  # Phi, as scipy.stats.norm.cdf computes it
            x[~low, i] = marginal.isf(special.ndtr(-zi[~low]))  # 1 - Phi, as norm.sf computes it
        return x

    def to_standard(self, x: np.ndarray) -> np.ndarray:
        """``u = L^-1 Phi^-1(F(x))`` for ``x [K, n]`` -> ``u [K, n]``; +-inf outside a marginal's support."""
        x = self._points(x, "x")
        z = np.empty_like(x)
        for i, marginal in enumerate(self.marginals):
            cdf, sf = marginal.cdf(x[:, i]), marginal.sf(x[:, i])
            low = cdf <= 0.5
            z[:, i] = np.where(low, stats.norm.ppf(np.where(low, cdf, 0.5)), stats.norm.isf(np.where(low, 0.5, sf)))
        return np.linalg.solve(self._cholesky, z.T).T if self.correlation is not None else z

    def jacobian(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points and the exact Jacobian of ``x(u)``.

        Returns
        -------
        x : ``[K, n]``
            ``x(u)`` (inputs' units).
        dx_du : ``[K, n, n]``
            ``diag(phi(z_i) / f_i(x_i)) L``, ``z = L u`` (inputs' units per unit of ``u``), from
            ``exp(log phi(z) - log f(x))``.
        """
        x, _, scale = self._scales(u)
        return x, scale[:, :, None] * self._cholesky[None, :, :]

    def _scales(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``x [K, n]``, ``z = L u [K, n]`` and ``s = dx/dz = phi(z) / f(x) [K, n]`` (from log space)."""
        u = self._points(u, "u")
        z = u @ self._cholesky.T
        x = self.to_physical(u)
        log_scale = np.empty_like(z)
        for i, marginal in enumerate(self.marginals):
            log_scale[:, i] = -0.5 * z[:, i] ** 2 - LOG_SQRT_2PI - marginal.logpdf(x[:, i])
        return x, z, np.exp(log_scale)

    def second_derivatives(self, u: np.ndarray) -> np.ndarray:
        """``d2x_i / dz_i^2 = -s_i (z_i + s_i d log f_i / dx)`` at ``u [K, n]``, ``[K, n]`` (inputs' units).

        The score ``d log f_i / dx`` by a fourth-order central difference of ``logpdf`` with step
        ``1e-3 s_i`` (module notes).
        """
        x, z, scale = self._scales(u)
        score = np.empty_like(x)
        for i, marginal in enumerate(self.marginals):
            h = 1e-3 * scale[:, i]
            f = [marginal.logpdf(x[:, i] + k * h) for k in (-2.0, -1.0, 1.0, 2.0)]
            with np.errstate(invalid="ignore"):
                score[:, i] = np.where(h > 0, (f[0] - 8.0 * f[1] + 8.0 * f[2] - f[3]) / (12.0 * np.where(h > 0, h, 1.0)),
                                       0.0)
        return -scale * (z + scale * score)

    def pull_back_hessian(self, u: np.ndarray, grad_x: np.ndarray, hess_x: np.ndarray) -> np.ndarray:
        """The Hessian in ``u`` of ``g(x(u))`` from its gradient and Hessian in ``x`` at ``x(u)``.

        ``H_u = J^T H_x J + sum_i (dg/dx_i) (d2x_i/dz_i^2) L_i^T L_i`` (module notes).

        Parameters
        ----------
        u
            ``[K, n]`` points in the standard space.
        grad_x
            ``[K, ..., n]`` ``dg/dx`` at ``x(u)`` (per unit of ``x``).
        hess_x
            ``[K, ..., n, n]`` ``d2g/dx2`` at ``x(u)``, the same leading dims.

        Returns
        -------
        ``[K, ..., n, n]`` per unit of ``u`` squared.
        """
        _, dx_du = self.jacobian(u)
        grad_x, hess_x = np.asarray(grad_x, dtype=float), np.asarray(hess_x, dtype=float)
        k, n = dx_du.shape[:2]
        if grad_x.shape[0] != k or grad_x.shape[-1] != n or hess_x.shape != (*grad_x.shape, n):
            raise ConfigError(f"`grad_x` [K, ..., {n}] and `hess_x` [K, ..., {n}, {n}] must agree for K = {k}, "
                              f"got shapes {grad_x.shape} and {hess_x.shape}")
        lead = grad_x.shape[1:-1]
        g = grad_x.reshape(k, -1, n)
        h = hess_x.reshape(k, -1, n, n)
        curvature = self.second_derivatives(u)  # [K, n]
        first = np.einsum("kia,keij,kjb->keab", dx_du, h, dx_du)
        chol = self._cholesky
        second = np.einsum("kei,ki,ia,ib->keab", g, curvature, chol, chol)
        return (first + second).reshape(k, *lead, n, n)

    def pull_back(self, fn: GradientFn) -> GradientFn:
        """A limit state in ``x`` as one in ``u``: ``u -> (g(x(u)), dg/dx . dx/du)``.

        ``fn`` maps ``x [K, n]`` to values ``[K, ...]`` and gradients ``[K, ..., n]`` (per unit of ``x``);
        the result maps ``u [K, n]`` to the same values and gradients per unit of ``u`` (chain rule with
        :meth:`jacobian`); :meth:`pull_back_hessian` does the same for a Hessian.
        """
        def in_u(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x, dx_du = self.jacobian(u)
            values, grad_x = fn(x)
            grad_x = np.asarray(grad_x, dtype=float)
            lead = grad_x.shape[1:-1]
            flat = grad_x.reshape(len(x), -1, self.n)
            return np.asarray(values, dtype=float), np.einsum("kej,kji->kei", flat, dx_du).reshape(
                len(x), *lead, self.n)

        return in_u


def nataf(marginals: Sequence[Any], correlation: np.ndarray | None = None) -> Nataf:
    """The :class:`Nataf` transform of ``marginals`` under a Gaussian copula of normal-score correlation."""
    return Nataf(tuple(marginals), None if correlation is None else np.asarray(correlation, dtype=float))
