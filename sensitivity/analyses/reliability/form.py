"""First-order reliability: design points of ``g(u) <= 0`` in the standard normal space, many starts at once.

The design point solves ``min ||u||`` subject to ``g(u) = 0``. Each start iterates the improved HL-RF step
(Zhang & Der Kiureghian 1995): the HL-RF direction

``d = ((grad g . u - g) / ||grad g||^2) grad g - u``

with a step length from an Armijo backtracking search on the merit function
``m(u) = ||u||^2 / 2 + c |g(u)|``, ``c = gamma max(||u||, ||u + d||) / ||grad g||`` (``gamma > 1``). Since
``c > ||u|| / ||grad g||``, ``d`` is a descent direction of ``m``:
``grad m . d <= -||u - (alpha . u) alpha||^2 - (c - ||u|| / ||grad g||) |g| < 0`` away from a design point,
which is what makes the method converge where plain HL-RF cycles. That step is the SQP step of the problem
with the Lagrangian's Hessian ``B = I``; by default ``B`` is a damped BFGS estimate of ``I + mu H_g`` instead
(``B d + mu grad g = -u``, ``grad g . d = -g``; Powell 1978), which keeps the descent property
(``grad m . d <= -d.B d - (c - |mu|) |g|``, ``c >= gamma |mu|``) and converges superlinearly at a curved design
point where HL-RF's linear rate is slow or oscillates (Ishigami's: 15 iterations instead of 100 unconverged).
Near a design point (residual below ``local_radius``) a step that halves the residual is taken even where the
merit function cannot resolve its decrease (about the squared off-normal distance, below the rounding of ``g``
for tolerances under ``sqrt(eps)``). All starts and all events step together: one call of the limit state per
iteration and per backtracking step, on every start still running.

A start has converged when both its distance to the surface ``|g| / ||grad g||`` and the part of ``u``
off the normal, ``||u - (alpha . u) alpha||``, are below ``tolerance`` (standard units). Then
``alpha = -grad g / ||grad g||`` (unit normal, pointing into the failure domain), ``beta = alpha . u*``
(signed: negative where the origin lies in the failure domain, ``g(0) < 0``), ``Pf = Phi(-beta)``
(``norm.sf``), importance factors ``alpha_i^2``. Starts that do not converge keep their status and NaN.

Converged starts are clustered into distinct design points by the direction cosine of their ``alpha``; a search
then starts more where the others may lie (:mod:`~sensitivity.analyses.reliability.search`). The probability of
the union of the distinct half-spaces (a series system) is ``1 - Phi_k(beta; rho)``, ``rho_ij = alpha_i . alpha_j``
(:func:`~sensitivity.analyses.reliability.union.union_probability`), or with ``union='sum'`` ``sum Phi(-beta_i)``.

References
----------
Hasofer, A. M. & Lind, N. C. (1974), Exact and invariant second-moment code format, J. Eng. Mech. Div.
100(1), 111-121, doi:10.1061/JMCEA3.0001848.
Rackwitz, R. & Fiessler, B. (1978), Structural reliability under combined random load sequences, Computers &
Structures 9(5), 489-494, doi:10.1016/0045-7949(78)90046-9.
Zhang, Y. & Der Kiureghian, A. (1995), Two improved algorithms for reliability analysis, in Reliability and
Optimization of Structural Systems, Springer, 297-304, doi:10.1007/978-0-387-34866-7_32.
Powell, M. J. D. (1978), A fast algorithm for nonlinearly constrained optimization calculations, in Numerical
Analysis, Lecture Notes in Mathematics 630, Springer, 144-157, doi:10.1007/BFb0067703.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from sensitivity.analyses.reliability._checks import choice, fraction, positive, positive_int
from sensitivity.analyses.reliability.search import found_new, search_starts
from sensitivity.analyses.reliability.union import union_probability
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

stats = lazy_import("scipy.stats")

#: ``u [K, n] -> (g [K] or [K, E], grad_u g [K, n] or [K, E, n])``, batched.
LimitStateFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

RUNNING, CONVERGED, MAX_ITERATIONS, LINE_SEARCH_FAILED, ZERO_GRADIENT, NOT_FINITE = -1, 0, 1, 2, 3, 4
SINGULAR_STEP, NOT_STARTED = 5, 6
#: What each status code of a start means.
STATUS_MESSAGES = {
    CONVERGED: "converged", MAX_ITERATIONS: "max_iterations reached",
    LINE_SEARCH_FAILED: "line search found no decrease of the merit function", ZERO_GRADIENT: "zero gradient of g",
    NOT_FINITE: "g or its gradient not finite", SINGULAR_STEP: "the step's linear system was singular",
    NOT_STARTED: "search start not used (the event's last round found no new design point)"}


@dataclass(frozen=True)
class FormSettings:
    """Settings of :func:`form`.

    Parameters
    ----------
    max_iterations
        Most iHL-RF steps per start.
    tolerance
        Convergence on ``|g| / ||grad g||`` and ``||u - (alpha . u) alpha||`` [standard units].
    gamma
        Merit-function factor, > 1 (Zhang & Der Kiureghian 1995 suggest 2).
    armijo
        Sufficient-decrease fraction of the Armijo rule, in (0, 1).
    backtrack
        Step-length reduction per backtracking step, in (0, 1).
    max_backtracks
        Most backtracking steps per iteration before the start fails with ``LINE_SEARCH_FAILED``.
    quasi_newton
        Step with a damped BFGS estimate of the Lagrangian's Hessian ``I + mu H_g`` (an SQP step: superlinear
        near a curved design point where HL-RF's step, ``B = I``, contracts slowly or oscillates); False: the
        iHL-RF step.
    local_radius
        Within this convergence residual (``max(|g| / ||grad g||, ||u - (alpha . u) alpha||)``) [standard units]
        a step that halves the residual is taken even where the merit function cannot resolve its decrease.
    cluster_cosine
        Two converged starts are the same design point when the cosine of their ``alpha`` reaches this.
    search_rounds
        Rounds of the search for design points the starts missed (:func:`form`); 0: none.
    search_starts
        Starts per event and search round, on the sphere of the event's smallest ``beta``.
    beta_margin
        Distinct design points with ``beta`` more than this above the smallest are dropped [standard units]
        (1: each contributes less than ``Phi(-beta - 1) / Phi(-beta)``, 2.4 % at ``beta = 3``).
    union
        Probability of the union of distinct design points: ``'series'`` (``1 - Phi_k(beta; rho)``) or
        ``'sum'`` (``sum Phi(-beta_i)``).
    contribution
        A design point contributes when its ``Phi(-beta_i)`` reaches this fraction of the largest one;
        ``several_contribute`` flags events where more than one does.
    """

    max_iterations: int = 100
    tolerance: float = 1e-6
    gamma: float = 2.0
    armijo: float = 0.5
    backtrack: float = 0.5
    max_backtracks: int = 40
    quasi_newton: bool = True
    local_radius: float = 1e-2
    cluster_cosine: float = 0.99
    search_rounds: int = 3
    search_starts: int = 4
    beta_margin: float = 1.0
    union: Literal["series", "sum"] = "series"
    contribution: float = 0.01

    def __post_init__(self) -> None:
        positive_int("max_iterations", self.max_iterations)
        positive_int("max_backtracks", self.max_backtracks)
        positive("tolerance", self.tolerance)
        positive("local_radius", self.local_radius)
        if not isinstance(self.quasi_newton, bool):
            raise ConfigError(f"`quasi_newton` must be true or false, got {self.quasi_newton!r}")
        if positive("gamma", self.gamma) <= 1:
            raise ConfigError(f"`gamma` must be > 1, got {self.gamma!r}")
        fraction("armijo", self.armijo)
        fraction("backtrack", self.backtrack)
        if not isinstance(self.cluster_cosine, (int, float)) or not -1 < self.cluster_cosine <= 1:
            raise ConfigError(f"`cluster_cosine` must be in (-1, 1], got {self.cluster_cosine!r}")
        if not isinstance(self.search_rounds, int) or isinstance(self.search_rounds, bool) or self.search_rounds < 0:
            raise ConfigError(f"`search_rounds` must be an integer >= 0, got {self.search_rounds!r}")
        positive_int("search_starts", self.search_starts)
        positive("beta_margin", self.beta_margin)
        choice("union", self.union, ("series", "sum"))
        fraction("contribution", self.contribution, closed=True)


@dataclass(frozen=True)
class FormResult:
    """Design points of ``E`` events from ``S`` starts; ``D`` the most distinct points of any event.

    Per start (``[E, S]``, ``[E, S, n]``): ``start_u`` (last iterate), ``start_beta``, ``start_status``
    (:data:`STATUS_MESSAGES`), ``start_iterations``, ``start_g`` and ``start_gradient_norm`` (``g`` and
    ``||grad_u g||`` at the last iterate: how close a start that failed came to the surface), ``start_point`` (index of its distinct design point,
    -1 if not converged). Per distinct design point, most probable first (``[E, D]``, ``[E, D, n]``, NaN
    padded): ``design_u``, ``design_beta``, ``alpha``, ``importance`` (``alpha^2``), ``gradient``
    (``grad_u g`` at ``u*``), ``design_pf`` (``Phi(-beta_i)``), ``starts`` (how many starts found it). Per
    event (``[E]``): ``beta`` (smallest ``beta_i``), ``pf`` (union of the distinct points, ``union``),
    ``n_points``, ``several_contribute``. ``evaluations``: points at which the limit state was evaluated.
    """

    start_u: np.ndarray
    start_beta: np.ndarray
    start_status: np.ndarray
    start_iterations: np.ndarray
    start_g: np.ndarray
    start_gradient_norm: np.ndarray
    start_point: np.ndarray
    design_u: np.ndarray
    design_beta: np.ndarray
    alpha: np.ndarray
    importance: np.ndarray
    gradient: np.ndarray
    design_pf: np.ndarray
    starts: np.ndarray
    beta: np.ndarray
    pf: np.ndarray
    n_points: np.ndarray
    several_contribute: np.ndarray
    union: str
    evaluations: int

    @property
    def note(self) -> str:
        """One line on the events whose probability several design points share."""
        several = np.flatnonzero(self.several_contribute)
        if several.size == 0:
            return ""
        how = ("1 - Phi_k(beta; rho) over the distinct design points" if self.union == "series"
               else "the sum of Phi(-beta_i) over the distinct design points (an upper bound)")
        return f"events {several.tolist()} have several contributing design points; pf is {how}"


def _evaluate(fn: LimitStateFn, points: np.ndarray, events: np.ndarray, n_events: int | None
              ) -> tuple[np.ndarray, np.ndarray, int]:
    """``g`` and ``grad g`` of each point's own event: ``[K]``, ``[K, n]``, and the number of events.

    A limit state with an ``own(points, events)`` method
    (:class:`~sensitivity.analyses.reliability.events.ThresholdLimitState`) evaluates only those, once the number of
    events is known."""
    own = getattr(fn, "own", None)
    if own is not None and n_events is not None:
        values, grads = (np.asarray(a, dtype=float) for a in own(points, events))
        if values.shape != (len(points),) or grads.shape != points.shape:
            raise ConfigError(f"the limit state's own events must be values [K] and gradients [K, n] for "
                              f"[K, n] = {list(points.shape)}, got shapes {values.shape} and {grads.shape}")
        return values, grads, n_events
    values, grads = fn(points)
    values, grads = np.asarray(values, dtype=float), np.asarray(grads, dtype=float)
    k, n = points.shape
    if values.ndim == 1:
        values, grads = values[:, None], grads[:, None, :]
    if values.ndim != 2 or values.shape[0] != k or grads.shape != (*values.shape, n):
        raise ConfigError(f"the limit state must return values [K] or [K, E] and gradients [K, n] or [K, E, n] "
                          f"for K = {k}, n = {n}, got shapes {values.shape} and {grads.shape}")
    if n_events is not None and values.shape[1] != n_events:
        raise ConfigError(f"the limit state returned {values.shape[1]} events, before {n_events}")
    rows = np.arange(k)
    return values[rows, events], grads[rows, events], values.shape[1]


def form(limit_state: LimitStateFn, starts: np.ndarray, settings: FormSettings = FormSettings(), *,
         seed: int | np.random.Generator | None = 0) -> FormResult:
    """Design points of every event of ``limit_state`` from every start, by batched iHL-RF / SQP, then a search
    for the design points the starts missed.

    After the given starts, up to ``search_rounds`` rounds start ``search_starts`` more per event on the sphere of
    its smallest ``beta``, in the directions farthest from every design point found (:func:`~sensitivity.analyses.reliability.search.search_starts`);
    an event stops searching after a round that found no new distinct point within ``beta_margin``. Distinct
    points farther than ``beta_margin`` beyond the smallest ``beta`` are dropped (their share of ``Pf`` is below
    ``Phi(-beta - margin) / Phi(-beta)``).

    Parameters
    ----------
    limit_state
        ``u [K, n] -> (g [K, E], grad [K, E, n])`` (or ``[K]``, ``[K, n]`` for one event) in the standard
        normal space; failure is ``g <= 0``. Each row is evaluated for all events and only its own event's
        column kept, so ``E`` outputs x thresholds (:func:`~sensitivity.analyses.reliability.events.threshold_events`)
        cost one batched call per step.
    starts
        ``[S, n]`` starting points in ``u`` (the origin, ``zeros((1, n))``, is the classical start; see
        :func:`sphere_starts` for several); every event starts from every one.
    settings
        :class:`FormSettings`.
    seed
        Of the search's directions.

    Returns
    -------
    FormResult
    """
    if not isinstance(settings, FormSettings):
        raise ConfigError(f"`settings` must be a FormSettings, got {type(settings).__name__}")
    starts = np.asarray(starts, dtype=float)
    if starts.ndim != 2 or starts.shape[0] < 1 or not np.all(np.isfinite(starts)):
        raise ConfigError(f"`starts` must be a finite [S, n] array with S >= 1, got shape {starts.shape}")
    s, n = starts.shape
    _, _, e = _evaluate(limit_state, starts[:1], np.zeros(1, dtype=int), None)
    first = _iterate(limit_state, np.repeat(starts[None], e, axis=0).reshape(e * s, n), np.repeat(np.arange(e), s),
                     e, settings)
    evaluations = 1 + first.pop("evaluations")
    rounds = [{k: v.reshape(e, s, *v.shape[1:]) for k, v in first.items()}]
    rng = np.random.default_rng(seed)
    searching = np.ones(e, dtype=bool)
    for _ in range(settings.search_rounds):
        known = {k: np.concatenate([r[k] for r in rounds], axis=1) for k in ("beta", "alpha")}
        picked, centres = search_starts(known["beta"], known["alpha"], searching, settings, rng)
        if not picked.size:
            break
        k = settings.search_starts
        run = _iterate(limit_state, centres.reshape(-1, n), np.repeat(picked, k), e, settings)
        evaluations += run.pop("evaluations")
        padded = {name: np.full((e, k, *v.shape[1:]), np.nan if v.dtype.kind == "f" else NOT_STARTED if name ==
                                "status" else 0, dtype=v.dtype) for name, v in run.items()}
        for name, v in run.items():
            padded[name][picked] = v.reshape(len(picked), k, *v.shape[1:])
        rounds.append(padded)
        searching = found_new(known["beta"], known["alpha"], padded["beta"], padded["alpha"], settings)
    out = {k: np.concatenate([r[k] for r in rounds], axis=1) for k in rounds[0]}
    result = _cluster(out["u"], out["beta"], out["alpha"], out["grad"], out["g"], settings)
    return FormResult(start_u=out["u"], start_beta=out["beta"], start_status=out["status"],
                      start_iterations=out["iterations"], start_g=out["g"],
                      start_gradient_norm=np.linalg.norm(out["grad"], axis=2), union=settings.union,
                      evaluations=evaluations, **result)


def _iterate(limit_state: LimitStateFn, u: np.ndarray, events: np.ndarray, e: int, settings: FormSettings) -> dict:
    """iHL-RF / SQP from the starts ``u [B, n]`` of events ``events [B]``: per start its last iterate ``u``, ``g``,
    ``grad``, ``status``, ``iterations``, and where converged ``beta`` and ``alpha`` (else NaN); ``evaluations``."""
    u = u.copy()
    n = u.shape[1]
    g, grad, _ = _evaluate(limit_state, u, events, e)
    evaluations = len(u)
    status = np.full(len(u), RUNNING)
    iterations = np.zeros(len(u), dtype=int)
    hess = np.repeat(np.eye(n)[None], len(u), axis=0)  # the Lagrangian's Hessian, I + mu H_g: I is HL-RF's
    tol = settings.tolerance
    for step in range(settings.max_iterations + 1):
        running = status == RUNNING
        norm = np.linalg.norm(grad, axis=1)
        status[running & ~(np.isfinite(g) & np.all(np.isfinite(grad), axis=1))] = NOT_FINITE
        status[(status == RUNNING) & (norm == 0)] = ZERO_GRADIENT
        running = status == RUNNING
        safe = np.where(running, norm, 1.0)
        alpha = -grad / safe[:, None]
        along = np.sum(alpha * u, axis=1)
        off = np.linalg.norm(u - along[:, None] * alpha, axis=1)
        status[running & (np.abs(g) / safe <= tol) & (off <= tol)] = CONVERGED
        active = np.flatnonzero(status == RUNNING)
        if active.size == 0 or step == settings.max_iterations:
            break
        hess[active] = _well_conditioned(hess[active])
        ua, ga, grada, na = u[active], g[active], grad[active], safe[active]
        d, mu = _direction(hess[active], ua, ga, grada)
        singular = ~(np.all(np.isfinite(d), axis=1) & np.isfinite(mu))
        status[active[singular]] = SINGULAR_STEP
        active, ua, ga, grada, na, d, mu = (a[~singular] for a in (active, ua, ga, grada, na, d, mu))
        c = settings.gamma * np.maximum(np.maximum(np.linalg.norm(ua, axis=1), np.linalg.norm(ua + d, axis=1)) / na,
                                        np.abs(mu))
        slope = np.sum(ua * d, axis=1) + c * np.sign(ga) * np.sum(grada * d, axis=1)
        ud, dd = np.sum(ua * d, axis=1), np.sum(d**2, axis=1)
        residual = np.maximum(np.abs(ga) / na, off[active])
        step_length = np.ones(active.size)
        pending = np.arange(active.size)
        for _ in range(settings.max_backtracks):
            lam = step_length[pending]
            trial = ua[pending] + lam[:, None] * d[pending]
            gt, gradt, _ = _evaluate(limit_state, trial, events[active[pending]], e)
            evaluations += len(trial)
            # m(u + lam d) - m(u) without the cancellation of ||u||^2 (exact: ||u + lam d||^2 - ||u||^2)
            change = lam * ud[pending] + 0.5 * lam**2 * dd[pending] + c[pending] * (np.abs(gt) - np.abs(ga[pending]))
            ok = np.isfinite(change) & (change <= settings.armijo * lam * slope[pending])
            ok |= _local_progress(trial, gt, gradt, residual[pending], settings.local_radius)
            done = active[pending[ok]]
            if settings.quasi_newton:
                hess[done] = _bfgs(hess[done], trial[ok] - u[done], mu[pending[ok]], gradt[ok] - grad[done])
            u[done], g[done], grad[done] = trial[ok], gt[ok], gradt[ok]
            pending = pending[~ok]
            if pending.size == 0:
                break
            step_length[pending] *= settings.backtrack
        status[active[pending]] = LINE_SEARCH_FAILED
        iterations[active] += 1
    status[status == RUNNING] = MAX_ITERATIONS
    converged = status == CONVERGED
    norm = np.linalg.norm(grad, axis=1)
    alpha = np.where(converged[:, None], -grad / np.where(converged, norm, 1.0)[:, None], np.nan)
    beta = np.where(converged, np.sum(alpha * u, axis=1), np.nan)
    return dict(u=u, g=g, grad=grad, status=status, iterations=iterations, beta=beta, alpha=alpha,
                evaluations=evaluations)


def _well_conditioned(hess: np.ndarray, limit: float = 1e12) -> np.ndarray:
    """``hess [K, n, n]`` with every quasi-Newton estimate that is not finite or whose condition number exceeds
    ``limit`` reset to ``I`` (the HL-RF step): the safeguard that keeps an SQP step from a numerically singular
    ``B`` (a damped BFGS update at a start where the surrogate is flat along some input) from being taken."""
    finite = np.all(np.isfinite(hess), axis=(1, 2))
    ok = finite.copy()
    if finite.any():
        with np.errstate(all="ignore"):
            ok[finite] = np.linalg.cond(hess[finite]) <= limit
    return np.where(ok[:, None, None], hess, np.eye(hess.shape[1])[None])


def _direction(hess: np.ndarray, u: np.ndarray, g: np.ndarray, grad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The SQP step ``d`` and multiplier ``mu`` of ``min ||u||^2 / 2`` subject to ``g(u) + grad g . d = 0``.

    ``B d + mu grad g = -u`` with ``B`` [K, n, n] positive definite: ``mu = (g - grad g . B^-1 u) /
    (grad g . B^-1 grad g)``, ``d = -B^-1 (u + mu grad g)``; with ``B = I``, the HL-RF step. A row whose system
    is singular gets NaN (its start ends with ``SINGULAR_STEP``), not an exception for the whole batch.
    """
    rhs = np.stack([u, grad], axis=2)
    try:
        solved = np.linalg.solve(hess, rhs)
    except np.linalg.LinAlgError:
        solved = np.full(rhs.shape, np.nan)
        for k in range(len(hess)):
            try:
                solved[k] = np.linalg.solve(hess[k], rhs[k])
            except np.linalg.LinAlgError:
                pass
    inv_u, inv_grad = solved[..., 0], solved[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = (g - np.sum(grad * inv_u, axis=1)) / np.sum(grad * inv_grad, axis=1)
    return -(inv_u + mu[:, None] * inv_grad), mu


def _bfgs(hess: np.ndarray, step: np.ndarray, mu: np.ndarray, grad_change: np.ndarray) -> np.ndarray:
    """Powell's damped BFGS update of the Lagrangian's Hessian ``B`` [K, n, n] after ``step`` [K, n].

    The Lagrangian's gradient ``u + mu grad g`` changed by ``y = step + mu grad_change``; where
    ``step . y < 0.2 step . B step`` (curvature of the wrong sign, the constraint's concave side), ``y`` is moved
    towards ``B step`` so that ``B`` stays positive definite (Powell 1978, doi:10.1007/BFb0067703;
    Nocedal & Wright 2006, Procedure 18.2). Zero steps leave ``B`` unchanged.
    """
    y = step + mu[:, None] * grad_change
    bs = np.einsum("kij,kj->ki", hess, step)
    sbs, sy = np.sum(step * bs, axis=1), np.sum(step * y, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.where(sy >= 0.2 * sbs, 1.0, 0.8 * sbs / (sbs - sy))
        r = theta[:, None] * y + (1.0 - theta)[:, None] * bs
        update = hess - bs[:, :, None] * bs[:, None, :] / sbs[:, None, None] \
            + r[:, :, None] * r[:, None, :] / np.sum(step * r, axis=1)[:, None, None]
    keep = (sbs > 0) & np.all(np.isfinite(update), axis=(1, 2))
    return np.where(keep[:, None, None], update, hess)


def _local_progress(u: np.ndarray, g: np.ndarray, grad: np.ndarray, residual: np.ndarray, radius: float
                    ) -> np.ndarray:
    """Whether trial points ``u`` at least halve the convergence residual of starts already within ``radius``.

    The residual is ``max(|g| / ||grad g||, ||u - (alpha . u) alpha||)``, the two convergence measures. Near a
    design point the merit function's decrease, about the squared off-normal distance, falls below the rounding
    of ``g`` (a float64 ``g`` of magnitude ``1`` resolves ``||u_off||`` down to ``sqrt(eps) ~ 1.5e-8``, a float32
    surrogate's to ``~3e-4``), so the Armijo test rejects every step there; a step that halves the residual is
    measured progress instead (a contraction: the local phase cannot cycle).
    """
    norm = np.linalg.norm(grad, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = -grad / norm[:, None]
        off = np.linalg.norm(u - np.sum(alpha * u, axis=1)[:, None] * alpha, axis=1)
        trial = np.maximum(np.abs(g) / norm, off)
    return (residual <= radius) & np.isfinite(trial) & (trial <= 0.5 * residual)


def _cluster(u: np.ndarray, beta: np.ndarray, alpha: np.ndarray, grad: np.ndarray, g: np.ndarray,
             settings: FormSettings) -> dict:
    """Distinct design points per event (greedy by ``beta``, same point when ``cos(alpha_i, alpha_j)`` is high),
    each represented by its start closest to the surface (smallest ``|g| / ||grad g||``: of starts converged to
    one point within ``tolerance``, the most accurate ``beta``, not the smallest)."""
    e, s, n = u.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.abs(g) / np.linalg.norm(grad, axis=2)
    groups: list[list[list[int]]] = []
    start_point = np.full((e, s), -1)
    for ev in range(e):
        reps: list[list[int]] = []
        for j in np.argsort(np.where(np.isfinite(beta[ev]), beta[ev], np.inf)):
            if not np.isfinite(beta[ev, j]):
                break
            for k, members in enumerate(reps):
                if alpha[ev, members[0]] @ alpha[ev, j] >= settings.cluster_cosine:
                    members.append(j)
                    start_point[ev, j] = k
                    break
            else:
                start_point[ev, j] = len(reps)
                reps.append([j])
        if reps:  # the points that matter: within beta_margin of the smallest
            kept = [r for r in reps if beta[ev, r[0]] <= beta[ev, reps[0][0]] + settings.beta_margin]
            for r in reps[len(kept):]:
                start_point[ev, r] = -1
            reps = kept
        groups.append(reps)
    d = max(1, max(len(g) for g in groups))
    design_u, design_alpha, design_grad = (np.full((e, d, n), np.nan) for _ in range(3))
    design_beta = np.full((e, d), np.nan)
    starts = np.zeros((e, d), dtype=int)
    pf = np.full(e, np.nan)
    several = np.zeros(e, dtype=bool)
    for ev, reps in enumerate(groups):
        for k, members in enumerate(reps):
            j = members[int(np.argmin(distance[ev, members]))]
            design_u[ev, k], design_alpha[ev, k], design_grad[ev, k] = u[ev, j], alpha[ev, j], grad[ev, j]
            design_beta[ev, k], starts[ev, k] = beta[ev, j], len(members)
        if reps:
            b, a = design_beta[ev, :len(reps)], design_alpha[ev, :len(reps)]
            pf[ev] = union_probability(b, a, settings.union)
            single = stats.norm.sf(b)
            several[ev] = np.count_nonzero(single >= settings.contribution * single.max()) > 1
    design_pf = stats.norm.sf(design_beta)
    return dict(start_point=start_point, design_u=design_u, design_beta=design_beta, alpha=design_alpha,
                importance=design_alpha**2, gradient=design_grad, design_pf=design_pf, starts=starts,
                beta=design_beta[:, 0], pf=pf, n_points=np.array([len(r) for r in groups]),
                several_contribute=several)


def threshold_sensitivity(result: FormResult, dg_dthreshold: np.ndarray) -> np.ndarray:
    """``d beta_i / d T`` at every distinct design point, ``[E, D]`` [1 / threshold units].

    Moving the threshold moves the surface ``g = 0`` along ``alpha`` by ``(dg/dT) dT / ||grad_u g||``, so
    ``d beta / d T = (dg/dT) / ||grad_u g||`` (Madsen, Krenk & Lind 1986, ch. 6; Bjerager & Krenk 1989,
    doi:10.1061/(ASCE)0733-9399(1989)115:7(1577)). For a failure ``y > T`` (``g = T - y``, ``dg/dT = +1``)
    raising the threshold raises ``beta``.

    Parameters
    ----------
    dg_dthreshold
        ``[E]`` partial derivative of each event's ``g`` with respect to its threshold (``+1`` for
        ``'above'``, ``-1`` for ``'below'``, :func:`~sensitivity.analyses.reliability.events.threshold_events`).
    """
    dg = np.asarray(dg_dthreshold, dtype=float)
    if dg.shape != result.beta.shape:
        raise ConfigError(f"`dg_dthreshold` must be [{result.beta.shape[0]}], got shape {dg.shape}")
    return dg[:, None] / np.linalg.norm(result.gradient, axis=2)
