"""Solver settings of the batched calibration: Levenberg-Marquardt and Gauss-Newton, and fit statuses.

A solver is an immutable object of hyperparameters; :func:`~sensitivity.analyses.calibration.calibrate`
runs it. Each holds the rules in which the two methods differ, applied to all starts at once by
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
Marquardt, D. W. (1963). An algorithm for least-squares estimation of nonlinear
parameters. J. SIAM 11(2), 431-441. https://doi.org/10.1137/0111030

More, J. J. (1978). The Levenberg-Marquardt algorithm: implementation and theory.
Lecture Notes in Mathematics 630, 105-116. https://doi.org/10.1007/BFb0067700

Nielsen, H. B. (1999). Damping parameter in Marquardt's method. Report
IMM-REP-1999-05, Technical University of Denmark.
"""
from __future__ import annotations

from dataclasses import dataclass
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

    def start_damping(self) -> float:
        """``lam`` of every start before its first step."""
        return float(self.initial_damping)

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

    def update_damping(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray):
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

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.line_search, bool):
            raise ConfigError(f"GaussNewton: `line_search` must be a bool, got {self.line_search!r}")

    def start_damping(self) -> float:
        """Step fraction ``alpha`` of every start before its first step."""
        return 1.0

    def scaled_step(self, normal: np.ndarray, g: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
        """Step ``-alpha A^+ g`` with the pseudo-inverse of the scaled normal matrix ``A``, its eigenvalues
        below ``rcond^2`` (singular values of the Jacobian below ``rcond``) times the largest, or below
        what float64 resolves in ``A``, counted as zero."""
        w, v = np.linalg.eigh(normal)
        floor = max(rcond**2, 10 * g.shape[1] * np.finfo(float).eps)
        keep = w > floor * w[:, -1:]
        inverse = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
        return -damping[:, None] * np.einsum("kij,kj->ki", v, inverse * np.einsum("kji,kj->ki", v, g))

    def accepts(self, rho: np.ndarray, finite: np.ndarray) -> np.ndarray:
        """``[K]`` bool: with ``line_search`` a sufficient decrease, else any finite trial cost."""
        return finite & (rho > _GAIN_THRESHOLD) if self.line_search else finite

    def update_damping(self, damping: np.ndarray, nu: np.ndarray, rho: np.ndarray, accepted: np.ndarray):
        """Next ``(alpha, nu)``: back to 1 after an accepted step, halved after a rejected one."""
        return np.where(accepted, 1.0, 0.5 * damping), nu


Solver = LevenbergMarquardt | GaussNewton
