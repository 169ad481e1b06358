"""The worth of data: observations removed, candidates added, and a greedy sequential design.

The verbs mirror pyEMU's ``Schur`` (White et al. 2016):

* :func:`removed_importance` — ``get_removed_obs_importance``: each forecast's posterior variance when an
  observation (group) is dropped from the data; its increase is that observation's worth;
* :func:`added_importance` — ``get_added_obs_importance`` with the problem's observations as ``base_obslist``:
  the posterior variance when a candidate (group) is added; its decrease is the candidate's worth;
* :func:`next_most_important` — ``next_most_important_added_obs``: the greedy sequence of ``k`` candidates,
  each chosen given the ones before it, by a forecast's variance, or by D- or A-optimality of the posterior.

Adding a candidate group ``c`` (rows ``J_c``, independent noise variances ``s_c``) to a posterior ``P = F F^T``
is a low-rank update, done for every candidate at once. With ``W_c = S_c^-1/2 J_c F`` (``[m_c, n_par]``) and
``z = F^T y``, ::

    y^T P_new y  = y^T P y - |K_c^-1 W_c z|^2,           K_c K_c^T = I + W_c W_c^T
    ln det P_new = ln det P - 2 sum ln diag K_c
    tr P_new     = tr P - |K_c^-1 W_c F^T|_F^2,

which for one candidate row ``j`` is the familiar ``var - (y^T P j)^2 / (j^T P j + s)`` (Sherman-Morrison;
the matrix determinant lemma for ``ln det``). The decrease is computed directly, as a sum of squares, so a
worth is never negative. The greedy design appends the chosen rows to the QR factor of :mod:`.linear` rather
than subtracting from ``P``, so the error does not accumulate over the steps.

Removing an observation group is done from scratch for each group, batched: its whitened rows are zeroed (for
a diagonal noise covariance; for a correlated one the kept rows are re-whitened with the kept block of ``C_e``,
as pyEMU's ``get`` does) and the QR factor recomputed. A downdate would subtract, and lose every digit when
the removed group is what pins a direction down. The worth is not the difference of the two variances either
(which loses ``log10(variance / worth)`` digits): it is the decrease of adding the group back to the posterior
without it, the sum of squares above with ``F`` that posterior's factor. For a correlated noise the group's rows
are whitened conditionally on the kept ones (the trailing rows of ``L_e^-1 J`` with ``C_e = L_e L_e^T`` ordered
kept first), which are independent of them and add the rest of the information.

Greedy selection is exact for ``k = 1``. ``ln det`` is monotone submodular in the chosen set, so the greedy
D-optimal design is within ``1 - 1/e`` of the best ``k``-subset (Nemhauser et al. 1978; Shamaiah et al. 2010);
a forecast's variance reduction is not submodular in general, and the bound then holds only through the
submodularity ratio (Das and Kempe 2011).

References
----------
White, J. T., Fienen, M. N., and Doherty, J. E. (2016). A python framework for environmental model uncertainty
analysis. Environmental Modelling & Software 85, 217-228. https://doi.org/10.1016/j.envsoft.2016.08.017

Nemhauser, G. L., Wolsey, L. A., and Fisher, M. L. (1978). An analysis of approximations for maximizing
submodular set functions I. Mathematical Programming 14, 265-294. https://doi.org/10.1007/BF01588971

Shamaiah, M., Banerjee, S., and Vikalo, H. (2010). Greedy sensor selection: leveraging submodularity. 49th IEEE
Conference on Decision and Control, 2572-2577. https://doi.org/10.1109/CDC.2010.5717225

Das, A., and Kempe, D. (2011). Submodular meets spectral: greedy algorithms for subset selection, sparse
approximation and dictionary selection. ICML 2011, 1057-1064. https://arxiv.org/abs/1102.3975
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sensitivity.analyses.worth.groups import GroupSpec, resolve_groups
from sensitivity.analyses.worth.linear import (FOSM, finite_array, information_factor, log_det, names_of,
                                               posterior_factor, whiten)
from sensitivity.analyses.worth.settings import DesignSettings
from sensitivity.errors import ConfigError

#: Bytes one batch of the removal's stacked QR factorisations may take.
BATCH_BYTES = 64 * 2**20


@dataclass(frozen=True)
class ObservationWorth:
    """Forecast variances and posterior-covariance summaries after removing or adding each group.

    Attributes
    ----------
    kind
        ``"removed"`` (existing observations dropped) or ``"added"`` (candidates gained).
    group_names
        ``[n_groups]`` names of the groups (the members' own names when each is its own group).
    forecast_names
        ``[n_fore]`` forecast names.
    base_variance
        ``[n_fore]`` the problem's posterior forecast variances (pyEMU's ``base`` row) [forecast units squared].
    variance
        ``[n_groups, n_fore]`` posterior forecast variances after the change [forecast units squared].
    worth
        ``[n_groups, n_fore]`` ``|variance - base_variance|``, computed directly as a sum of squares (not as
        that difference): the increase when removed, the decrease when added (>= 0) [forecast units squared].
    base_log_det, log_det
        ``ln det P`` before and ``[n_groups]`` after the change.
    base_trace, trace
        ``trace P`` before and ``[n_groups]`` after the change [parameter units squared].
    """

    kind: Literal["removed", "added"]
    group_names: tuple[str, ...]
    forecast_names: tuple[str, ...]
    base_variance: np.ndarray
    variance: np.ndarray
    worth: np.ndarray
    base_log_det: float
    log_det: np.ndarray
    base_trace: float
    trace: np.ndarray


@dataclass(frozen=True)
class Design:
    """A greedy sequence of chosen candidates (groups) and the posterior after each step.

    Attributes
    ----------
    criterion
        The settings' criterion.
    forecast
        The forecast the ``"variance"`` criterion served (``None`` for the others).
    chosen
        ``[n_steps]`` names of the chosen candidates (groups), in order; fewer than ``k`` when no remaining
        candidate lowers the criterion any more (pyEMU stops there too).
    chosen_index
        ``[n_steps]`` their positions among the candidate groups.
    forecast_names
        ``[n_fore]`` forecast names.
    base_variance, variance
        ``[n_fore]`` posterior forecast variances before the first step and ``[n_steps, n_fore]`` after each
        [forecast units squared].
    base_log_det, log_det
        ``ln det P`` before and ``[n_steps]`` after each step.
    base_trace, trace
        ``trace P`` before and ``[n_steps]`` after each step [parameter units squared].
    """

    criterion: str
    forecast: str | None
    chosen: tuple[str, ...]
    chosen_index: np.ndarray
    forecast_names: tuple[str, ...]
    base_variance: np.ndarray
    variance: np.ndarray
    base_log_det: float
    log_det: np.ndarray
    base_trace: float
    trace: np.ndarray

    @property
    def reduction_from_previous(self) -> np.ndarray:
        """``[n_steps, n_fore]`` fraction of each step's starting variance it removes (pyEMU's
        ``unc_reduce_iter_base`` / 100)."""
        before = np.vstack([self.base_variance[None, :], self.variance[:-1]])
        return 1.0 - self.variance / before

    @property
    def reduction_from_base(self) -> np.ndarray:
        """``[n_steps, n_fore]`` fraction of the base variance removed so far (``unc_reduce_initial_base`` / 100)."""
        return 1.0 - self.variance / self.base_variance[None, :]


def removed_importance(problem: FOSM, groups: GroupSpec = None) -> ObservationWorth:
    """Posterior forecast variances with each observation (group) removed from the data.

    Parameters
    ----------
    problem
        The linear problem (:func:`~sensitivity.analyses.worth.linear.fosm`).
    groups
        Group name -> observation names or positions; ``None`` (default) removes each observation on its own.

    Returns
    -------
    ObservationWorth
        ``kind="removed"``; ``worth`` is each forecast variance's increase.
    """
    names, members = resolve_groups(groups, problem.observation_names, "groups")
    lower, n_obs, n_par = problem.prior_factor, *problem.jacobian.shape
    variance, worth = np.empty((2, len(names), len(problem.forecast_names)))
    logdet, trace = np.empty(len(names)), np.empty(len(names))
    if problem.noise_is_diagonal:
        rows = problem.whitened_jacobian
        whitened = rows @ lower
        batch = max(1, BATCH_BYTES // (8 * (n_obs + n_par) * n_par))
        for start in range(0, len(names), batch):
            part = slice(start, min(start + batch, len(names)))
            keep = np.ones((part.stop - start, n_obs))
            for i, removed in enumerate(members[part]):
                keep[i, removed] = 0.0
            variance[part], logdet[part], trace[part], factor = _summaries(
                problem, information_factor(keep[:, :, None] * whitened[None]))
            worth[part] = _gains(factor, problem.forecasts, rows, members[part])[0]
    else:
        for row, removed in enumerate(members):
            kept = np.setdiff1d(np.arange(n_obs), removed)
            order = np.concatenate([kept, removed])  # kept first: their rows whitened by the kept block of C_e
            rows = whiten(problem.jacobian[order], problem.noise_covariance[np.ix_(order, order)], False)
            at = slice(row, row + 1)
            variance[at], logdet[at], trace[at], factor = _summaries(
                problem, information_factor(rows[:kept.size] @ lower)[None])
            worth[at] = _gains(factor, problem.forecasts, rows, [np.arange(kept.size, n_obs)])[0]
    return ObservationWorth(kind="removed", group_names=names, forecast_names=problem.forecast_names,
                            base_variance=problem.posterior_variance, variance=variance, worth=worth,
                            base_log_det=problem.log_det_posterior, log_det=logdet,
                            base_trace=problem.trace_posterior, trace=trace)


def added_importance(problem: FOSM, candidates: np.ndarray, candidate_noise: np.ndarray | float, *,
                     candidate_names: Sequence[str] | None = None, groups: GroupSpec = None) -> ObservationWorth:
    """Posterior forecast variances with each candidate (group) added to the data, all candidates at once.

    Parameters
    ----------
    problem
        The linear problem; its observations are the existing data (pyEMU's ``base_obslist``).
    candidates
        ``[n_cand, n_par]`` Jacobian rows of the candidate observations [candidate units / parameter units].
    candidate_noise
        ``[n_cand]`` noise variances of the candidates, or one for all [candidate units squared]; the candidates'
        noise is independent of each other's and of the existing observations'.
    candidate_names
        ``[n_cand]`` names, ``cand_0``, ... by default; none may be an existing observation's.
    groups
        Group name -> candidate names or positions, added together; ``None`` (default) adds each on its own.

    Returns
    -------
    ObservationWorth
        ``kind="added"``; ``worth`` is each forecast variance's decrease.

    Raises
    ------
    ConfigError
        A wrong shape, a non-positive noise variance, or a candidate that is already observed.
    """
    jac, names = _candidates(problem, candidates, candidate_noise, candidate_names)
    group_names, members = resolve_groups(groups, names, "groups")
    factor = problem.posterior_factor
    drop, dlogdet, dtrace = _gains(factor, problem.forecasts, jac, members)
    return ObservationWorth(kind="added", group_names=group_names, forecast_names=problem.forecast_names,
                            base_variance=problem.posterior_variance,
                            variance=problem.posterior_variance[None, :] - drop, worth=drop,
                            base_log_det=problem.log_det_posterior, log_det=problem.log_det_posterior - dlogdet,
                            base_trace=problem.trace_posterior, trace=problem.trace_posterior - dtrace)


def next_most_important(problem: FOSM, candidates: np.ndarray, candidate_noise: np.ndarray | float,
                        settings: DesignSettings = DesignSettings(), *, candidate_names: Sequence[str] | None = None,
                        groups: GroupSpec = None) -> Design:
    """Choose ``settings.k`` candidates (groups) one at a time, each the best given those chosen before.

    Parameters
    ----------
    problem, candidates, candidate_noise, candidate_names, groups
        As for :func:`added_importance`.
    settings
        The criterion, ``k`` and the forecast (:class:`~sensitivity.analyses.worth.settings.DesignSettings`).

    Returns
    -------
    Design

    Raises
    ------
    ConfigError
        As for :func:`added_importance`; an unknown forecast, a missing one with several forecasts, or ``k``
        larger than the number of candidate groups.
    """
    jac, names = _candidates(problem, candidates, candidate_noise, candidate_names)
    group_names, members = resolve_groups(groups, names, "groups")
    if settings.k > len(group_names):
        raise ConfigError(f"k = {settings.k} exceeds the {len(group_names)} candidate groups")
    forecast = None
    if settings.criterion == "variance":
        if settings.forecast is None and len(problem.forecast_names) > 1:
            raise ConfigError(f"forecast must name one of {list(problem.forecast_names)} for the variance criterion")
        forecast = settings.forecast if settings.forecast is not None else problem.forecast_names[0]
        column = problem.forecast_index(forecast)
    lower, info = problem.prior_factor, problem.information_factor
    whitened_rows = jac @ lower
    remaining = np.ones(len(group_names), dtype=bool)
    chosen, variance, logdet, trace = [], [], [], []
    for _ in range(settings.k):
        left = np.flatnonzero(remaining)
        drop, dlogdet, dtrace = _gains(posterior_factor(lower, info), problem.forecasts, jac,
                                       [members[i] for i in left])
        gain = {"variance": drop[:, column] if forecast is not None else None, "d_optimal": dlogdet,
                "a_optimal": dtrace}[settings.criterion]
        best = int(np.argmax(gain))
        if not gain[best] > 0:
            break
        pick = int(left[best])
        remaining[pick] = False
        chosen.append(pick)
        info = np.linalg.qr(np.concatenate([info, whitened_rows[members[pick]]]), mode="r")  # R^T R + a^T a
        var, ld, tr, _ = _summaries(problem, info[None])
        variance.append(var[0])
        logdet.append(ld[0])
        trace.append(tr[0])
    n_fore = len(problem.forecast_names)
    return Design(criterion=settings.criterion, forecast=forecast, chosen=tuple(group_names[i] for i in chosen),
                  chosen_index=np.array(chosen, dtype=int), forecast_names=problem.forecast_names,
                  base_variance=problem.posterior_variance, variance=np.reshape(variance, (len(chosen), n_fore)),
                  base_log_det=problem.log_det_posterior, log_det=np.array(logdet),
                  base_trace=problem.trace_posterior, trace=np.array(trace))


def _candidates(problem: FOSM, candidates: np.ndarray, noise: np.ndarray | float,
                names: Sequence[str] | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Noise-whitened candidate rows ``S^-1/2 J_c`` and the candidates' names, checked."""
    n_par = len(problem.parameter_names)
    jac = finite_array(candidates, "candidates")
    if jac.ndim == 1 and jac.shape == (n_par,):
        jac = jac[None, :]
    if jac.ndim != 2 or jac.shape[1] != n_par or jac.shape[0] == 0:
        raise ConfigError(f"candidates must be [n_cand >= 1, n_par={n_par}], got shape {np.shape(candidates)}")
    var = finite_array(noise, "candidate_noise")
    if var.ndim == 0:
        var = np.full(jac.shape[0], float(var))
    if var.shape != (jac.shape[0],):
        raise ConfigError(f"candidate_noise must be [{jac.shape[0]}] variances or one, got shape {var.shape}")
    if np.any(var <= 0):
        bad = int(np.argmin(var))
        raise ConfigError(f"candidate_noise must hold positive variances, got {var[bad]:g} at position {bad}")
    labels = names_of(names, jac.shape[0], "candidate_names", "cand")
    observed = set(problem.observation_names)
    for label in labels:
        if label in observed:
            raise ConfigError(f"candidate {label!r} is already observed; remove it from candidates or from the data")
    return jac / np.sqrt(var)[:, None], labels


def _gains(factor: np.ndarray, forecasts: np.ndarray, rows: np.ndarray,
           members: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decreases of the forecast variances ``[G, n_fore]``, of ``ln det P`` ``[G]`` and of ``trace P`` ``[G]`` when
    each group of noise-whitened ``rows`` is added to ``P = F F^T`` (see the module's docstring); ``factor`` is one
    ``F`` ``[n_par, n_par]`` for every group or ``[G, n_par, n_par]``, one per group."""
    sizes = np.array([m.size for m in members])
    if factor.ndim == 2 and np.all(sizes == 1):   # one row each on one posterior: Sherman-Morrison, vectorised
        w = rows[np.concatenate(members)] @ factor  # W rows: S^-1/2 j^T F, [n_cand, n_par]
        z = factor.T @ forecasts                    # [n_par, n_fore]
        denom = 1.0 + np.sum(w**2, axis=1)
        drop = (w @ z) ** 2 / denom[:, None]
        return drop, np.log(denom), np.sum((w @ factor.T) ** 2, axis=1) / denom
    width = int(sizes.max())
    padded = np.zeros((len(members), width, rows.shape[1]))   # zero rows add nothing to I + W W^T
    for g, member in enumerate(members):
        padded[g, :member.size] = rows[member]
    projected = padded @ factor                               # W, [G, width, n_par]
    transposed = np.swapaxes(factor, -1, -2)
    gram = np.eye(width) + projected @ np.swapaxes(projected, -1, -2)
    chol = np.linalg.cholesky(gram)
    drop = np.sum(np.linalg.solve(chol, projected @ (transposed @ forecasts)) ** 2, axis=-2)
    dlogdet = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    dtrace = np.sum(np.linalg.solve(chol, projected @ transposed) ** 2, axis=(-2, -1))
    return drop, dlogdet, dtrace


def _summaries(problem: FOSM, info: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Forecast variances ``[B, n_fore]``, ``ln det P`` ``[B]``, ``trace P`` ``[B]`` and the posterior factors
    ``F`` ``[B, n, n]`` of a stack ``[B, n, n]`` of information factors."""
    factor = posterior_factor(problem.prior_factor[None], info)
    variance = np.sum((np.swapaxes(factor, -1, -2) @ problem.forecasts) ** 2, axis=1)
    return variance, log_det(problem.prior_factor[None], info), np.sum(factor**2, axis=(1, 2)), factor
