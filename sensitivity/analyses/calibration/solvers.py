"""Solver settings of the batched calibration: trust region (default), Levenberg-Marquardt, Gauss-Newton.

A solver is an immutable object of hyperparameters; :func:`~sensitivity.analyses.calibration.calibrate`
runs it. Each holds the rules in which the methods differ, applied to all starts at once by
:mod:`~sensitivity.analyses.calibration.iteration`: the scaling ``D``, the step from the scaled
normal equations, the acceptance test and the damping update.

Method
------
* Step: the damped normal equations ``(J^T J + lam D) dz = -J^T r``, scaled by
  ``D^{-1/2}`` so that their diagonal is at most 1, are solved by LU (Gauss-Newton:
  the pseudo-inverse from their eigen-decomposition, eigenvalues below ``rcond^2``
  times the largest counted as zero). Between iterations a start keeps only
  ``J^T J`` and ``J^T r`` ([n, n] and [n]), not its [m, n] Jacobian; squaring the
  condition number there is harmless because the gradient ``J^T r`` that decides
  where the fit stops is exact, and the statistics at the estimates are computed from
  the SVD of the full Jacobian (see below). ``lam >= 1e-15`` keeps the system regular.
  ``D`` is Marquardt's diagonal scaling, the running maximum of ``diag(J^T J)``
  (More, 1978); without it, ``D`` is the running maximum of its largest entry times
  the identity (Levenberg's isotropic damping), so ``lam`` is dimensionless either way.
* Damping update (Nielsen, 1999): a step is accepted when the gain ratio
  ``rho = actual / predicted cost reduction`` exceeds 1e-4; then
  ``lam *= max(1/3, 1 - (2 rho - 1)^3)``, else ``lam *= nu`` and ``nu`` doubles.
* Trust region (:class:`TrustRegion`, the default): the damping follows from a radius
  ``Delta`` on ``|D^{1/2} dz|``; ``lam = 0`` (the Gauss-Newton step, by LU, else the
  pseudo-inverse step) when that step fits, else the root of the secular equation
  ``|p(lam)| = Delta`` found by Newton's method in the eigenbasis of the scaled normal
  matrix; the radius starts at the scaled size of the start and is updated from the
  gain ratio (see the class).
* Gauss-Newton: the undamped (pseudo-inverse) step scaled by a step fraction
  ``alpha``; with ``line_search`` a step is accepted under the same gain-ratio test
  and ``alpha`` is halved until it is (backtracking), restarting at 1 after success.
* Convergence (MINPACK-style, More 1978): ``gtol`` on the largest cosine between
  the residual and a Jacobian column, ``max_j |J_j^T r| / (|J_j| |r|)``; ``ftol``
  when both the actual and the predicted relative cost reductions are below it;
  ``xtol`` when every component of the tried step satisfies
  ``|dz_j| <= xtol (xtol + |z_j|)`` (relative per parameter, so a parameter of
  small magnitude is not judged on the scale of a large one).

References
----------
Branch, M. A., Coleman, T. F. & Li, Y. (1999). A subspace, interior, and conjugate
gradient method for large-scale bound-constrained minimization problems. SIAM J. Sci.
Comput. 21(1), 1-23. https://doi.org/10.1137/S1064827595289108

Hebden, M. D. (1973). An algorithm for minimization using exact second derivatives.
Report TP 515, AERE Harwell.

Marquardt, D. W. (1963). An algorithm for least-squares estimation of nonlinear
parameters. J. SIAM 11(2), 431-441. https://doi.org/10.1137/0111030

More, J. J. (1978). The Levenberg-Marquardt algorithm: implementation and theory.
Lecture Notes in Mathematics 630, 105-116. https://doi.org/10.1007/BFb0067700

More, J. J. & Sorensen, D. C. (1983). Computing a trust region step. SIAM J. Sci.
Stat. Comput. 4(3), 553-572. https://doi.org/10.1137/0904038

Nielsen, H. B. (1999). Damping parameter in Marquardt's method. Report
IMM-REP-1999-05, Technical University of Denmark.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from enum import IntEnum

import numpy as np

from sensitivity.errors import ConfigError

_GAIN_THRESHOLD = 1e-4  # minimum gain ratio for a step to count as a decrease (MINPACK's p0001)
_MIN_DAMPING = 1e-15  # floor of lam relative to the unit-bounded scaled diagonal: keeps A + lam I regular


class Status(IntEnum):
    """Termination of one fit; positive values are convergence."""

    SINGULAR = -2
    NON_FINITE = -1
    MAX_ITER = 0
    GTOL = 1
    FTOL = 2
    XTOL = 3


RUNNING = 100  # still iterating (internal to the solve, never in a result)

STATUS_MESSAGES: dict[int, str] = {
    Status.SINGULAR: "converged, but the weighted Jacobian is rank-deficient: some parameters are not identifiable",
    Status.NON_FINITE: "the model returned non-finite values or Jacobian at the start",
    Status.MAX_ITER: "stopped at max_iter without meeting a tolerance",
    Status.GTOL: "converged: scaled gradient below gtol",
    Status.FTOL: "converged: relative cost reduction below ftol",
    Status.XTOL: "converged: relative step below xtol",
}

#: Statuses that :func:`calibrate` counts as failed fits.
FAILED = (Status.NON_FINITE, Status.MAX_ITER)


@dataclass(frozen=True)
class _Tolerances:
    """Stopping rules shared by the solvers (see the module docstring)."""

    max_iter: int = 200
    ftol: float = 1e-12
    xtol: float = 1e-12
    gtol: float = 1e-12

    def __post_init__(self) -> None:
        name = type(self).__name__
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ConfigError(f"{name}: `max_iter` must be an integer >= 1, got {self.max_iter!r}")
        for attr in ("ftol", "xtol", "gtol"):
            value = getattr(self, attr)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"{name}: `{attr}` must be a number in [0, 1), got {value!r}")

    def update_scaling(self, colnorm2: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
        """Running maximum of the squared column norms; columns never seen non-zero get 1."""
        current = colnorm2 if previous is None else np.maximum(previous, colnorm2)
        return np.where(current > 0, current, 1.0)


@dataclass(frozen=True)
class LevenbergMarquardt(_Tolerances):
    """Levenberg-Marquardt with Nielsen's damping update (immutable settings).

    Parameters
    ----------
    max_iter
        Cap on iterations (= trial points after the start) per start.
    ftol, xtol, gtol
        Relative cost-reduction, relative step and scaled-gradient tolerances.
    initial_damping
        Starting ``lam``, relative to the scaling ``D`` (dimensionless, > 0).
    marquardt_scaling
        Scale the damping per parameter by ``diag(J^T J)`` (Marquardt) instead of
        isotropically (Levenberg).
    """

    initial_damping: float = 1e-3
    marquardt_scaling: bool = True
    DAMPING: ClassVar[str] = "damping lambda relative to the scaling D"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.initial_damping, (int, float)) or not 0 < self.initial_damping < np.inf:
            raise ConfigError(f"LevenbergMarquardt: `initial_damping` must be > 0, got {self.initial_damping!r}")
        if not isinstance(self.marquardt_scaling, bool):
            raise ConfigError(f"LevenbergMarquardt: `marquardt_scaling` must be a bool, got {self.marquardt_scaling!r}")

    def update_scaling(self, colnorm2: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
        """As the base rule on ``diag(J^T J)``, or on its largest entry for every column (Levenberg)."""
        if not self.marquardt_scaling:
            colnorm2 = np.broadcast_to(colnorm2.max(axis=1, keepdims=True), colnorm2.shape)
        return super().update_scaling(colnorm2, previous)

    def start_damping(self, z: np.ndarray, scaling: np.ndarray) -> np.ndarray:
        """``[K]`` ``lam`` of every start before its first step."""
        return np.full(z.shape[0], float(self.initial_damping))

    def scaled_step(self, normal: np.ndarray, g: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
        """Damped step ``-(A + lam I)^-1 g`` for the scaled normal matrix ``A`` (unit-bounded diagonal)."""
        system = normal + damping[:, None, None] * np.eye(g.shape[1])
        try:
            return -np.linalg.solve(system, g[..., None])[..., 0]
        except np.linalg.LinAlgError:  # an exactly singular system in the batch: minimum-norm steps for all
            return -np.einsum("kij,kj->ki", np.linalg.pinv(system, hermitian=True), g)

    def accepts(self, rho: np.ndarray, finite: np.ndarray) -> np.ndarray:
        """``[K]`` bool: steps of gain ratio ``rho`` with a finite trial cost that are taken."""
        return finite & (rho > _GAIN_THRESHOLD)

    def update_damping(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray,
                       step_norm: np.ndarray):
        """Next ``(lam, nu)`` after a step of gain ratio ``rho`` (Nielsen's rule)."""
        with np.errstate(invalid="ignore", over="ignore"):
            shrink = np.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
        new_damping = np.where(accepted, np.maximum(damping * shrink, _MIN_DAMPING), damping * nu)
        new_nu = np.where(accepted, 2.0, nu * 2.0)
        return new_damping, new_nu


@dataclass(frozen=True)
class GaussNewton(_Tolerances):
    """Gauss-Newton with an optional backtracking line search (immutable settings).

    Parameters
    ----------
    max_iter, ftol, xtol, gtol
        As for :class:`LevenbergMarquardt`.
    line_search
        Halve the step fraction until the cost decreases sufficiently (gain ratio
        > 1e-4); without it every finite full step is taken.
    """

    line_search: bool = True
    DAMPING: ClassVar[str] = "step fraction alpha (Gauss-Newton)"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.line_search, bool):
            raise ConfigError(f"GaussNewton: `line_search` must be a bool, got {self.line_search!r}")

    def start_damping(self, z: np.ndarray, scaling: np.ndarray) -> np.ndarray:
        """``[K]`` step fraction ``alpha`` of every start before its first step."""
        return np.ones(z.shape[0])

    def scaled_step(self, normal: np.ndarray, g: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
        """Step ``-alpha A^+ g`` with the pseudo-inverse of the scaled normal matrix ``A`` (see
        :func:`_pseudo_inverse_step`)."""
        w, v, beta = _eigen(normal, g)
        return damping[:, None] * _pseudo_inverse_step(w, v, beta, rcond)

    def accepts(self, rho: np.ndarray, finite: np.ndarray) -> np.ndarray:
        """``[K]`` bool: with ``line_search`` a sufficient decrease, else any finite trial cost."""
        return finite & (rho > _GAIN_THRESHOLD) if self.line_search else finite

    def update_damping(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray,
                       step_norm: np.ndarray):
        """Next ``(alpha, nu)``: back to 1 after an accepted step, halved after a rejected one."""
        return np.where(accepted, 1.0, 0.5 * damping), nu


@dataclass(frozen=True)
class TrustRegion(_Tolerances):
    """Trust-region Levenberg-Marquardt, the default (immutable settings).

    The damping is not a setting that the fit adjusts blindly but follows from a
    radius ``Delta`` on the step in the variables scaled by ``D^{1/2}``: the step is
    the Gauss-Newton step when it is shorter than ``Delta``, and otherwise the
    Levenberg-Marquardt step whose ``lam`` makes its scaled length equal to ``Delta``
    (More, 1978; More & Sorensen, 1983). The radius starts at
    ``initial_radius * |D^{1/2} z0|`` (``initial_radius`` when that is 0), is cut to a
    quarter of the step length after a step of gain ratio below 1/4 and doubled after
    one above 3/4 that reached the boundary (Branch, Coleman & Li, 1999, as in scipy's
    ``least_squares(method="trf")``). Starting inside the scale of the start keeps the
    first steps from throwing a parameter onto a plateau where the model no longer
    depends on it (NIST BoxBOD from start 1, where Levenberg-Marquardt's ``b2 -> inf``
    leaves ``y = b1 = mean(y)``).

    Parameters
    ----------
    max_iter, ftol, xtol, gtol
        As for :class:`LevenbergMarquardt`; the defaults are stricter (500 iterations, 1e-14) so that
        every NIST StRD problem of higher difficulty reaches >= 7 certified digits from each start.
    initial_radius
        Initial radius relative to the scaled norm of the start (dimensionless, > 0).
    """

    max_iter: int = 500
    ftol: float = 1e-14
    xtol: float = 1e-14
    gtol: float = 1e-14
    initial_radius: float = 1.0
    DAMPING: ClassVar[str] = "trust-region radius Delta of the scaled step |D^(1/2) dz|"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.initial_radius, (int, float)) or not 0 < self.initial_radius < np.inf:
            raise ConfigError(f"TrustRegion: `initial_radius` must be > 0, got {self.initial_radius!r}")

    def start_damping(self, z: np.ndarray, scaling: np.ndarray) -> np.ndarray:
        """``[K]`` radius ``Delta`` of every start before its first step."""
        size = np.linalg.norm(np.sqrt(scaling) * np.where(np.isfinite(z), z, 0.0), axis=1)
        return self.initial_radius * np.where(size > 0, size, 1.0)

    def scaled_step(self, normal: np.ndarray, g: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
        """The minimiser of the quadratic model ``g^T p + p^T A p / 2`` over ``|p| <= Delta``: the Gauss-Newton
        step when it fits, else ``-(A + lam I)^-1 g`` with ``|p(lam)| = Delta``.

        The Gauss-Newton step is first solved by LU (``lam`` = 1e-15); only the starts where it does not
        fit, or is not finite, pay for the eigen-decomposition (ten times the cost of LU for small ``n``),
        which gives the pseudo-inverse step (taken when it fits) and the secular equation's root.
        """
        eye = np.eye(g.shape[1])
        try:
            step = -np.linalg.solve(normal + _MIN_DAMPING * eye, g[..., None])[..., 0]
        except np.linalg.LinAlgError:  # an exactly singular system in the batch: decompose every start
            step = np.full_like(g, np.nan)
        rest = np.flatnonzero(~(np.all(np.isfinite(step), axis=1) & (np.linalg.norm(step, axis=1) <= damping)))
        if rest.size:
            w, v, beta = _eigen(normal[rest], g[rest])
            inside = _pseudo_inverse_step(w, v, beta, rcond)
            lam = _secular_root(w, beta, damping[rest])
            with np.errstate(divide="ignore", invalid="ignore"):
                boundary = -np.einsum("kij,kj->ki", v, beta / (w + lam[:, None]))
            fits = np.linalg.norm(inside, axis=1) <= damping[rest]
            step[rest] = np.where(fits[:, None], inside, boundary)
        return step

    def accepts(self, rho: np.ndarray, finite: np.ndarray) -> np.ndarray:
        """``[K]`` bool: steps of gain ratio ``rho`` with a finite trial cost that are taken."""
        return finite & (rho > _GAIN_THRESHOLD)

    def update_damping(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray,
                       step_norm: np.ndarray):
        """Next ``(Delta, nu)`` after a step of scaled length ``step_norm`` and gain ratio ``rho``."""
        reached = step_norm > 0.95 * damping
        radius = np.where(rho < 0.25, 0.25 * step_norm, np.where((rho > 0.75) & reached, 2.0 * damping, damping))
        return radius, nu


def _eigen(normal: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigenvalues ``w [K, n]`` (ascending, clipped at 0) and vectors ``v`` of the scaled normal matrix, and
    the gradient in that basis ``beta = v^T g``."""
    w, v = np.linalg.eigh(normal)
    return np.maximum(w, 0.0), v, np.einsum("kji,kj->ki", v, g)


def _pseudo_inverse_step(w: np.ndarray, v: np.ndarray, beta: np.ndarray, rcond: float) -> np.ndarray:
    """Gauss-Newton step ``-A^+ g`` with eigenvalues below ``rcond^2`` (singular values of the Jacobian
    below ``rcond``) times the largest, or below what float64 resolves in ``A``, counted as zero."""
    floor = max(rcond**2, 10 * w.shape[1] * np.finfo(float).eps)
    keep = w > floor * w[:, -1:]
    inverse = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
    return -np.einsum("kij,kj->ki", v, inverse * beta)


def _secular_root(w: np.ndarray, beta: np.ndarray, radius: np.ndarray, n_newton: int = 40) -> np.ndarray:
    """``[K]`` ``lam >= 0`` with ``|p(lam)| = radius`` for ``|p(lam)|^2 = sum beta^2 / (w + lam)^2``.

    Newton's method on ``1/|p(lam)| - 1/radius`` (Hebden, 1973), which is concave and increasing in ``lam``,
    from the lower bound ``|beta| / radius - max(w)``: the iterates increase monotonically to the root, and
    stop when no ``lam`` moves by more than 1e-12 of itself (or after ``n_newton`` steps).
    """
    b2 = beta**2
    lam = np.maximum(np.sqrt(b2.sum(axis=1)) / radius - w[:, -1], _MIN_DAMPING * np.maximum(w[:, -1], 1.0))
    for _ in range(n_newton):
        shifted = w + lam[:, None]
        norm = np.sqrt(np.sum(b2 / shifted**2, axis=1))
        slope = np.sum(b2 / shifted**3, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_next = np.maximum(lam + np.where(slope > 0, (norm - radius) / radius * norm**2 / slope, 0.0), lam)
        if np.all(lam_next - lam <= 1e-12 * lam):  # converged everywhere (quadratically, within a few steps)
            return lam_next
        lam = lam_next
    return lam


Solver = LevenbergMarquardt | GaussNewton | TrustRegion
