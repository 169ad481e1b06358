"""Second-order reliability at FORM's design points: principal curvatures and four probabilities.

At a design point ``u* = beta alpha`` with gradient ``grad g`` and Hessian ``H`` (in ``u``), rotate so that
the last axis is ``alpha`` (a Householder reflection whose first ``n - 1`` rows span the tangent plane).
The principal curvatures are the eigenvalues of the ``(n-1) x (n-1)`` tangent block of ``H / ||grad g||``
(positive where the surface bends away from the origin, which lowers ``Pf``). The paraboloid
``u_n = beta + sum kappa_i u_i^2 / 2`` then gives

``breitung``
    ``Phi(-beta) prod (1 + beta kappa_i)^(-1/2)``, asymptotically exact as ``beta -> inf`` (Breitung 1984);
``hohenbichler``
    ``Phi(-beta) prod (1 + psi kappa_i)^(-1/2)``, ``psi = phi(beta) / Phi(-beta)`` (Hohenbichler & Rackwitz 1988);
``tvedt``
    Tvedt's three-term formula (Tvedt 1990, eq. 9-12): ``A1 + A2 + A3`` with
    ``A1`` Breitung's, ``A2 = (beta Phi(-beta) - phi(beta)) (P(beta) - P(beta + 1))``,
    ``A3 = (beta + 1)(beta Phi(-beta) - phi(beta)) (P(beta) - Re P(beta + i))``, ``P(s) = prod (1 + s kappa_i)^(-1/2)``;
``exact``
    the exact probability content of the paraboloid, Tvedt's (1990) exact integral, here computed by numerical
    quadrature along the steepest-descent contour ``s = beta + i t`` of its Laplace inversion:
    ``P(U_n - sum kappa_i U_i^2 / 2 >= beta) = phi(beta) sqrt(2 / pi) int_0^inf exp(-t^2 / 2)
    Re[P(beta + i t) / (beta + i t)] dt`` (``beta > 0``; the complement for ``beta < 0``). Its integrand is
    smooth and positive near ``t = 0``, so the result keeps its relative accuracy at ``Pf ~ 1e-12``.

Every formula needs ``1 + beta kappa_i > 0``; where that fails (a surface curving towards the origin faster
than the sphere of radius ``beta``) the status is ``CURVATURE_TOO_NEGATIVE`` and the probabilities are NaN.

References
----------
Breitung, K. (1984), Asymptotic approximations for multinormal integrals, J. Eng. Mech. 110(3), 357-366,
doi:10.1061/(ASCE)0733-9399(1984)110:3(357).
Hohenbichler, M. & Rackwitz, R. (1988), Improvement of second-order reliability estimates by importance
sampling, J. Eng. Mech. 114(12), 2195-2199, doi:10.1061/(ASCE)0733-9399(1988)114:12(2195).
Tvedt, L. (1990), Distribution of quadratic forms in normal space - application to structural reliability,
J. Eng. Mech. 116(6), 1183-1197, doi:10.1061/(ASCE)0733-9399(1990)116:6(1183).
Der Kiureghian, A. & De Stefano, M. (1991), Efficient algorithm for second-order reliability analysis,
J. Eng. Mech. 117(12), 2904-2923, doi:10.1061/(ASCE)0733-9399(1991)117:12(2904).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.reliability.form import FormResult
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

integrate = lazy_import("scipy.integrate")
stats = lazy_import("scipy.stats")

#: ``u [K, n] -> Hessian of g [K, n, n]`` or ``[K, E, n, n]``, batched.
HessianFn = Callable[[np.ndarray], np.ndarray]

OK, NO_DESIGN_POINT, CURVATURE_TOO_NEGATIVE, NOT_FINITE = 0, 1, 2, 3
#: What each SORM status code means.
STATUS_MESSAGES = {OK: "ok", NO_DESIGN_POINT: "no design point (padding or FORM failed)",
                   CURVATURE_TOO_NEGATIVE: "1 + beta kappa_i <= 0 for some curvature",
                   NOT_FINITE: "Hessian not finite"}


@dataclass(frozen=True)
class SormResult:
    """SORM at every distinct design point of a :class:`~sensitivity.analyses.reliability.form.FormResult`.

    ``curvatures [E, D, n-1]`` (ascending, per standard unit); ``pf_breitung``, ``pf_hohenbichler``,
    ``pf_tvedt`` (three-term), ``pf_exact`` (the paraboloid's exact content) and ``status`` ``[E, D]``
    (:data:`STATUS_MESSAGES`); ``beta`` ``[E, D]`` FORM's, and ``beta_*`` the generalised indices
    ``-Phi^-1(pf_*)``.
    """

    curvatures: np.ndarray
    beta: np.ndarray
    pf_breitung: np.ndarray
    pf_hohenbichler: np.ndarray
    pf_tvedt: np.ndarray
    pf_exact: np.ndarray
    status: np.ndarray

    @property
    def beta_exact(self) -> np.ndarray:
        """Generalised reliability index ``-Phi^-1(pf_exact)``."""
        return stats.norm.isf(self.pf_exact)

    @property
    def beta_breitung(self) -> np.ndarray:
        """Generalised reliability index ``-Phi^-1(pf_breitung)``."""
        return stats.norm.isf(self.pf_breitung)


def principal_curvatures(gradient: np.ndarray, hessian: np.ndarray) -> np.ndarray:
    """Principal curvatures ``[..., n-1]`` of ``g = 0`` from ``grad g [..., n]`` and ``H [..., n, n]``.

    Eigenvalues of the tangent block of ``Q H Q^T / ||grad g||``, ``Q`` the Householder reflection that maps
    ``alpha = -grad g / ||grad g||`` to ``-+e_n`` (the sign chosen for stability; the tangent block's
    eigenvalues do not depend on it).
    """
    grad, hess = np.asarray(gradient, dtype=float), np.asarray(hessian, dtype=float)
    norm = np.linalg.norm(grad, axis=-1)
    alpha = -grad / norm[..., None]
    n = grad.shape[-1]
    v = alpha.copy()
    v[..., -1] += np.where(alpha[..., -1] >= 0, 1.0, -1.0)
    q = np.eye(n) - 2.0 * v[..., :, None] * v[..., None, :] / np.sum(v * v, axis=-1)[..., None, None]
    rotated = q @ hess @ np.swapaxes(q, -1, -2) / norm[..., None, None]
    block = rotated[..., :-1, :-1]
    return np.linalg.eigvalsh(0.5 * (block + np.swapaxes(block, -1, -2)))


def _mills_gap(beta: np.ndarray) -> np.ndarray:
    """``beta Phi(-beta) - phi(beta)`` as ``phi(beta) (beta Phi(-beta) / phi(beta) - 1)``."""
    return stats.norm.pdf(beta) * (beta * np.exp(stats.norm.logsf(beta) - stats.norm.logpdf(beta)) - 1.0)


def breitung(beta: float, kappa: np.ndarray) -> float:
    """Breitung's (1984) ``Phi(-beta) prod (1 + beta kappa_i)^(-1/2)``."""
    return float(stats.norm.sf(beta) * np.prod(1.0 + beta * np.asarray(kappa)) ** -0.5)


def hohenbichler_rackwitz(beta: float, kappa: np.ndarray) -> float:
    """Hohenbichler & Rackwitz's (1988) ``Phi(-beta) prod (1 + kappa_i phi(beta) / Phi(-beta))^(-1/2)``."""
    psi = np.exp(stats.norm.logpdf(beta) - stats.norm.logsf(beta))
    return float(stats.norm.sf(beta) * np.prod(1.0 + psi * np.asarray(kappa)) ** -0.5)


def tvedt(beta: float, kappa: np.ndarray) -> float:
    """Tvedt's (1990) three-term approximation ``A1 + A2 + A3``."""
    kappa = np.asarray(kappa, dtype=float)
    p_beta = np.prod(1.0 + beta * kappa) ** -0.5
    p_next = np.prod(1.0 + (beta + 1.0) * kappa) ** -0.5
    p_complex = np.prod(np.sqrt(1.0 + (beta + 1j) * kappa.astype(complex)) ** -1.0).real
    gap = float(_mills_gap(np.float64(beta)))
    return float(stats.norm.sf(beta) * p_beta + gap * (p_beta - p_next) + (beta + 1.0) * gap * (p_beta - p_complex))


def _laplace_tail(b: float, kappa: np.ndarray, c: float) -> float:
    """``P(U_n - sum kappa_i U_i^2 / 2 >= b)`` by inverting its Laplace transform along ``Re s = c > 0``."""
    kappa = kappa.astype(complex)

    def integrand(t: float) -> float:
        s = c + 1j * t
        value = np.exp(s * s / 2.0 - s * b + c * b - c * c / 2.0) * np.prod(np.sqrt(1.0 + s * kappa)) ** -1.0 / s
        return value.real

    scale = np.exp(c * c / 2.0 - c * b) / np.pi
    head, _ = integrate.quad(integrand, 0.0, 10.0, epsabs=0.0, epsrel=1e-11, limit=400)
    tail, _ = integrate.quad(integrand, 10.0, np.inf, epsabs=0.0, epsrel=1e-11, limit=400)
    return float(scale * (head + tail))


def parabolic_exact(beta: float, kappa: np.ndarray) -> float:
    """Exact ``P(U_n >= beta + sum kappa_i U_i^2 / 2)`` for standard normal ``U`` (Tvedt 1990's exact result)."""
    kappa = np.asarray(kappa, dtype=float)
    if kappa.size == 0:
        return float(stats.norm.sf(beta))
    if np.any(1.0 + beta * kappa <= 0):
        return float("nan")
    if beta > 0:
        return _laplace_tail(beta, kappa, beta)
    if beta < 0:
        return 1.0 - _laplace_tail(-beta, -kappa, -beta)
    largest = max(1.0, float(np.max(-kappa)))
    return _laplace_tail(0.0, kappa, 0.5 / largest)


def sorm(hessian: HessianFn, result: FormResult) -> SormResult:
    """SORM probabilities at every distinct design point of ``result``.

    Parameters
    ----------
    hessian
        ``u [K, n] -> [K, E, n, n]``, or ``[K, n, n]``: the Hessian of ``g`` in ``u`` of every event, or of
        each row's own event only (row ``k`` is the design point of event ``events[k]`` of
        ``np.nonzero(isfinite(result.design_beta))``, the order it is called with; for many events the cheap
        form). One batched call at all design points.
    result
        FORM's result for the same limit state.
    """
    if not isinstance(result, FormResult):
        raise ConfigError(f"`result` must be a FormResult, got {type(result).__name__}")
    e, d, n = result.design_u.shape
    found = np.isfinite(result.design_beta)
    events, points = np.nonzero(found)
    curvatures = np.full((e, d, n - 1), np.nan)
    status = np.where(found, OK, NO_DESIGN_POINT)
    pfs = {name: np.full((e, d), np.nan) for name in ("breitung", "hohenbichler", "tvedt", "exact")}
    if events.size:
        h = np.asarray(hessian(result.design_u[events, points]), dtype=float)
        if h.shape != (events.size, n, n):
            if h.shape != (events.size, e, n, n):
                raise ConfigError(f"the Hessian must be [K, {n}, {n}] or [K, {e}, {n}, {n}] for K = {events.size}, "
                                  f"got shape {h.shape}")
            h = h[np.arange(events.size), events]
        kappa = principal_curvatures(result.gradient[events, points], h)
        curvatures[events, points] = kappa
        for i, (ev, p) in enumerate(zip(events, points)):
            beta, k = result.design_beta[ev, p], kappa[i]
            if not np.all(np.isfinite(h[i])):
                status[ev, p] = NOT_FINITE
                continue
            if np.any(1.0 + beta * k <= 0):
                status[ev, p] = CURVATURE_TOO_NEGATIVE
                continue
            pfs["breitung"][ev, p] = breitung(beta, k)
            pfs["hohenbichler"][ev, p] = hohenbichler_rackwitz(beta, k)
            pfs["tvedt"][ev, p] = tvedt(beta, k)
            pfs["exact"][ev, p] = parabolic_exact(beta, k)
    return SormResult(curvatures=curvatures, beta=result.design_beta.copy(), pf_breitung=pfs["breitung"],
                      pf_hohenbichler=pfs["hohenbichler"], pf_tvedt=pfs["tvedt"], pf_exact=pfs["exact"], status=status)
