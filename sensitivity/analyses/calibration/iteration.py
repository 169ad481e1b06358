"""The batched multi-start iteration: every start advanced together, each with its own state.

All K starts are advanced together as one vectorised computation, and every start keeps its
own damping, step acceptance and convergence test; a start that has converged is frozen. Each
iteration makes one model call with the trial points of every start still running (values
only, when a ``values`` function is given) and, for the starts whose step was accepted, one
Jacobian call (or keeps the Jacobian that came with the trial values). The rules in which
Levenberg-Marquardt and Gauss-Newton differ come from
:mod:`~sensitivity.analyses.calibration.solvers`.

Method
------
* Bounds: an active set with projection. Parameters sitting on a bound whose
  gradient pushes outward are held fixed for the step. When the step would still
  take parameters out of the box, those are moved onto the bound they cross and the
  step of the others is solved again with that move fixed (the minimiser of the same
  quadratic model on the remaining subspace), so the step is not bent by clipping:
  on the demo SEIR calibration this cut the iterations per start from 74 to 31. The
  predicted reduction is that of the step taken, and the gradient test uses the
  projected gradient.
* Precision: with ``step_jacobian`` (e.g. a float32 engine) only the steps use it; the
  cost, the acceptance and convergence tests use float64 values, and every statistic
  uses one ``value_and_jacobian`` call at the estimates.

References
----------
More, J. J. (1978). The Levenberg-Marquardt algorithm: implementation and theory.
Lecture Notes in Mathematics 630, 105-116. https://doi.org/10.1007/BFb0067700
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.analyses.calibration.model_calls import BLOCK, ModelCalls
from sensitivity.analyses.calibration.problem import Problem
from sensitivity.analyses.calibration.solvers import RUNNING, Solver, Status


@dataclass
class Fits:
    """Mutable per-start state of the batched solve (internal).

    The iterations keep only ``[K, n]``-sized summaries of the weighted Jacobian (its normal
    matrix and the gradient); the full residuals and Jacobians at the estimates are filled in
    by one last model call (:func:`_finish`).
    """

    x: np.ndarray  # [K, n] physical, current accepted point
    cost: np.ndarray  # [K]
    normal: np.ndarray  # [K, n, n] J_z^T J_z, whitened, in the solver's variables
    gradient: np.ndarray  # [K, n] J_z^T r
    scaling: np.ndarray  # [K, n] the scaling D (see :mod:`.solvers`)
    damping: np.ndarray  # [K]
    nu: np.ndarray  # [K]
    status: np.ndarray  # [K] int
    n_iter: np.ndarray  # [K] int
    values: np.ndarray | None = None  # [K, m] at the estimates (after _finish)
    jacobian: np.ndarray | None = None  # [K, m, n] raw
    r: np.ndarray | None = None  # [K, M] whitened (with prior rows)
    jx: np.ndarray | None = None  # [K, M, n] whitened, physical

    def put(self, idx: np.ndarray, **arrays: np.ndarray) -> None:
        for key, value in arrays.items():
            getattr(self, key)[idx] = value


@dataclass
class History:
    """Per-iteration records; column i holds every start's state after iteration i."""

    parameters: list[np.ndarray]
    cost: list[np.ndarray]
    gradient_norm: list[np.ndarray]
    damping: list[np.ndarray]
    step_norm: list[np.ndarray]
    accepted: list[np.ndarray]

    @classmethod
    def empty(cls) -> "History":
        return cls([], [], [], [], [], [])

    def record(self, fits: Fits, active: np.ndarray, gnorm: np.ndarray, step_norm: np.ndarray | None,
               accepted: np.ndarray | None) -> None:
        k, n = fits.x.shape
        row = np.full(k, np.nan)
        params = np.full((k, n), np.nan)
        params[active] = fits.x[active]
        self.parameters.append(params)
        for name, source in (("cost", fits.cost[active]), ("gradient_norm", gnorm), ("damping", fits.damping[active]),
                             ("step_norm", step_norm)):
            column = row.copy()
            if source is not None:
                column[active] = source
            getattr(self, name).append(column)
        flags = np.full(k, -1, dtype=np.int8)
        if accepted is not None:
            flags[active] = accepted.astype(np.int8)
        self.accepted.append(flags)


def _gradient_cosine(normal: np.ndarray, g: np.ndarray, cost: np.ndarray, free: np.ndarray) -> np.ndarray:
    """MINPACK's scaled gradient ``max_j |J_j^T r| / (|J_j| |r|)`` over free columns (0 when r = 0)."""
    col = np.sqrt(np.einsum("kii->ki", normal))
    rn = np.sqrt(2.0 * cost)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.abs(g) / (col * rn[:, None])
    cosine = np.where(free & (col > 0), cosine, 0.0)
    return np.where(rn > 0, cosine.max(axis=1), 0.0)


def _free(z: np.ndarray, g: np.ndarray, problem: Problem) -> np.ndarray:
    """Parameters not held on a bound: a bound is active when the descent direction -g leaves the box."""
    return ~(((z <= problem.lower) & (g > 0)) | ((z >= problem.upper) & (g < 0)))


def _step(solver: Solver, normal: np.ndarray, g: np.ndarray, scaling: np.ndarray, damping: np.ndarray,
          free: np.ndarray, rcond: float) -> np.ndarray:
    """Solver step ``dz`` from the scaled normal equations restricted to the free parameters."""
    root = np.sqrt(scaling)
    pair = free[:, :, None] & free[:, None, :]
    eye = np.eye(g.shape[1], dtype=bool)
    scaled = np.where(pair, normal / (root[:, :, None] * root[:, None, :]), np.where(eye, 1.0, 0.0))
    dz_scaled = solver.scaled_step(scaled, np.where(free, g / root, 0.0), damping, rcond)
    return np.where(free, dz_scaled / root, 0.0)  # exactly 0: a held parameter stays on its bound


def _projected_step(problem: Problem, solver: Solver, z: np.ndarray, normal: np.ndarray, g: np.ndarray,
                    scaling: np.ndarray, damping: np.ndarray, rcond: float) -> np.ndarray:
    """The step with the active set of :func:`_free`; where it would leave the box, the parameters that
    cross a bound are moved onto it and the others solved again with that move fixed (the minimiser of
    the same quadratic model in the remaining subspace), so the step keeps its quality instead of being
    bent by clipping."""
    free = _free(z, g, problem)
    step = _step(solver, normal, g, scaling, damping, free, rcond)
    target = z + step
    crossing = (target < problem.lower) | (target > problem.upper)
    redo = np.flatnonzero(crossing.any(axis=1))
    if redo.size:
        fixed = np.where(crossing[redo], np.clip(target[redo], problem.lower, problem.upper) - z[redo], 0.0)
        g_fixed = g[redo] + np.einsum("kij,kj->ki", normal[redo], fixed)
        step[redo] = fixed + _step(solver, normal[redo], g_fixed, scaling[redo], damping[redo],
                                   free[redo] & ~crossing[redo], rcond)
    return step


def _summaries(problem: Problem, x: np.ndarray, r: np.ndarray, jacobian: np.ndarray):
    """Normal matrix ``J_z^T J_z [K, n, n]``, gradient ``J_z^T r [K, n]`` and finiteness ``[K]`` of the
    whitened Jacobian (prior rows included) in the solver's variables.

    Only the observed rows of ``jacobian`` are touched, once; the prior rows and the chain rule of log
    parameters (``J_z = J_x diag(x)``) are applied to the ``[n, n]`` products.
    """
    m_o = problem.observations.n_observed
    jt = problem.observations.jacobian_transposed(jacobian)
    normal = jt @ jt.transpose(0, 2, 1)
    g = (jt @ r[:, :m_o, None])[:, :, 0]
    if problem.prior_whitening is not None:
        w = problem.prior_whitening
        normal += w.T @ w
        g += r[:, m_o:] @ w
    if problem.log_mask.any():
        chain = np.where(problem.log_mask, x, 1.0)
        normal *= chain[:, :, None] * chain[:, None, :]
        g *= chain
    finite = np.all(np.isfinite(normal), axis=(1, 2)) & np.all(np.isfinite(g), axis=1)
    normal[~finite], g[~finite] = 0.0, 0.0
    return normal, g, finite


def _jacobian_summaries(problem: Problem, calls: ModelCalls, x: np.ndarray, r: np.ndarray,
                        jacobian: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_summaries` at accepted points ``x`` in blocks of :data:`BLOCK` starts, each block's
    Jacobian computed (when not given) and reduced while it is in cache."""
    k, n = x.shape
    normal, g, finite = np.empty((k, n, n)), np.empty((k, n)), np.empty(k, bool)
    for start in range(0, k, BLOCK):
        rows = slice(start, start + BLOCK)
        jac = calls.jacobian(x[rows]) if jacobian is None else jacobian[rows]
        normal[rows], g[rows], finite[rows] = _summaries(problem, x[rows], r[rows], jac)
    return normal, g, finite


def solve(problem: Problem, calls: ModelCalls, x0: np.ndarray, solver: Solver,
          rcond: float) -> tuple[Fits, History]:
    """Advance every start of ``x0 [K, n]`` until it converges, fails or reaches ``solver.max_iter``; the
    final state at the estimates and the per-iteration history."""
    k = x0.shape[0]
    values, jacobian = calls.trial(x0.copy())
    r = problem.augmented_residual(x0, values)
    with np.errstate(over="ignore", invalid="ignore"):
        cost = 0.5 * np.sum(r**2, axis=1)
    ok = np.isfinite(cost)
    normal, g = np.zeros((k, problem.n, problem.n)), np.zeros((k, problem.n))
    normal[ok], g[ok], finite = _jacobian_summaries(problem, calls, x0[ok], r[ok],
                                                    None if jacobian is None else jacobian[ok])
    ok[ok] = finite
    fits = Fits(x=x0.copy(), cost=cost, normal=normal, gradient=g,
                scaling=solver.update_scaling(np.einsum("kii->ki", normal), None),
                damping=np.zeros(k), nu=np.full(k, 2.0),
                status=np.where(ok, RUNNING, Status.NON_FINITE).astype(np.int16), n_iter=np.zeros(k, np.int32))
    fits.damping[:] = solver.start_damping(problem.to_internal(x0), fits.scaling)
    gnorm = _gradient_cosine(normal[ok], g[ok], cost[ok], _free(problem.to_internal(x0[ok]), g[ok], problem))
    fits.status[np.flatnonzero(ok)[gnorm <= solver.gtol]] = Status.GTOL
    history = History.empty()
    history.record(fits, np.flatnonzero(ok), gnorm, None, None)
    for _ in range(solver.max_iter):
        active = np.flatnonzero(fits.status == RUNNING)
        if active.size == 0:
            break
        _iterate(problem, calls, solver, fits, history, active, rcond)
    fits.status[fits.status == RUNNING] = Status.MAX_ITER
    _finish(problem, calls, fits)
    return fits, history


def _iterate(problem: Problem, calls: ModelCalls, solver: Solver, fits: Fits, history: History, a: np.ndarray,
             rcond: float) -> None:
    """One batched iteration over the active starts ``a``: one trial call for all of them, and a
    Jacobian call for those whose step was accepted (unless the trial call brought it)."""
    x, cost_old, scaling = fits.x[a], fits.cost[a], fits.scaling[a]
    z, normal, g = problem.to_internal(x), fits.normal[a], fits.gradient[a]
    step = _projected_step(problem, solver, z, normal, g, scaling, fits.damping[a], rcond)
    z_try = np.clip(z + step, problem.lower, problem.upper)
    dz = z_try - z
    pred = -np.sum(g * dz, axis=1) - 0.5 * np.einsum("ki,kij,kj->k", dz, normal, dz)
    x_try = problem.from_internal(z_try)
    values, jacobian = calls.trial(x_try)
    r_try = problem.augmented_residual(x_try, values)
    with np.errstate(over="ignore", invalid="ignore"):
        cost_try = 0.5 * np.sum(r_try**2, axis=1)
    finite = np.isfinite(cost_try)
    ared = cost_old - cost_try
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(finite & (pred > 0), ared / pred, -np.inf)
    accepted = solver.accepts(rho, finite)
    took = np.flatnonzero(accepted)
    if took.size:
        normal_new, g_new, jac_finite = _jacobian_summaries(problem, calls, x_try[took], r_try[took],
                                                            None if jacobian is None else jacobian[took])
        accepted[took[~jac_finite]] = False  # a non-finite Jacobian rejects the step like a non-finite value
        kept = took[jac_finite]
        fits.put(a[kept], x=x_try[kept], cost=cost_try[kept], normal=normal_new[jac_finite], gradient=g_new[jac_finite])
    step_norm = np.linalg.norm(np.sqrt(scaling) * dz, axis=1)
    fits.damping[a], fits.nu[a] = solver.update_damping(fits.damping[a], fits.nu[a], rho, accepted, step_norm)
    fits.n_iter[a] += 1
    normal_now, g_now = fits.normal[a], fits.gradient[a]
    fits.scaling[a] = np.where(accepted[:, None], solver.update_scaling(np.einsum("kii->ki", normal_now), scaling),
                               scaling)
    gnorm = _gradient_cosine(normal_now, g_now, fits.cost[a], _free(problem.to_internal(fits.x[a]), g_now, problem))
    xtol_hit = np.all(np.abs(dz) <= solver.xtol * (solver.xtol + np.abs(z)), axis=1)
    ftol_hit = finite & (np.abs(ared) <= solver.ftol * cost_old) & (pred <= solver.ftol * cost_old)
    fits.status[a] = np.select([gnorm <= solver.gtol, ftol_hit, xtol_hit],
                               [Status.GTOL, Status.FTOL, Status.XTOL], RUNNING)
    history.record(fits, a, gnorm, step_norm, accepted)


def _finish(problem: Problem, calls: ModelCalls, fits: Fits) -> None:
    """Values, Jacobians and whitened residuals at the estimates from ``value_and_jacobian`` (one call per
    block of starts), so the statistics use its (full-precision) Jacobian whatever the steps used."""
    values, jacobian = calls.in_blocks(calls.value_and_jacobian, fits.x, "value_and_jacobian")
    r = problem.augmented_residual(fits.x, values)
    fits.values, fits.jacobian, fits.r = values, jacobian.astype(float, copy=False), r
    fits.jx = problem.augmented_jacobian(fits.x, jacobian)
    with np.errstate(over="ignore", invalid="ignore"):
        fits.cost = np.where(fits.status == Status.NON_FINITE, fits.cost, 0.5 * np.sum(r**2, axis=1))
