"""Reliability of an ensemble surrogate: ``Pf`` of every member beside the ensemble mean's, and their spread.

The analysis itself is the ensemble mean's (the surrogate every other analysis uses). Beside it, per event:

FORM of each member
    one batched FORM run with the members side by side, as ``K m`` outputs of one model
    (:func:`member_form`), from the same starts as the mean's;
the sampling estimate of each member
    importance sampling and Monte Carlo evaluate the mean and every member at the SAME samples (one
    evaluation of the ensemble per block, :meth:`~sensitivity.analyses.reliability.driver.PickedModel.copies`),
    importance sampling with the mean's proposal (centred at the mean's design points), so the members'
    estimates share their sampling error and their spread is the surrogate's
    (the paired design of :mod:`sensitivity.analyses.indices.ensemble`).

:func:`member_spread` turns them into ``pf_surrogate_std`` per method (the members' standard deviation,
``ddof=1``) and the reference method's ``pf_combined_interval``: its sampling interval widened by the
surrogate's prediction interval ``t_{K-1} sqrt(1 + 1/K) std`` (:func:`sensitivity.outputs.members.combined_bounds`;
the truth treated as one more draw of the members, Lakshminarayanan et al. 2017, arXiv:1612.01474).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sensitivity.analyses.reliability import events as ev
from sensitivity.analyses.reliability.form import form
from sensitivity.outputs.members import combined_bounds


def member_form(model: Any, plan: Any, starts: np.ndarray, members: int) -> np.ndarray:
    """``[K, E]`` FORM ``Pf`` of every member: the members side by side as ``K m`` quantities of one FORM run
    (each member's picked outputs or functionals, :meth:`~sensitivity.analyses.reliability.driver.Plan.pick`).

    Parameters
    ----------
    model
        The compiled ensemble (``x [N, n] -> ([K, N, *out], [K, N, *out, n])``).
    plan
        The driver's :class:`~sensitivity.analyses.reliability.driver.Plan`.
    starts
        ``[S, n]`` FORM starts in ``u`` (the mean's).
    members
        ``K``.
    """
    m, n = plan.size, plan.nataf.n
    t = len(plan.settings.thresholds)

    def stacked(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, jac = model(x)
        k = len(x)
        values, jac = plan.pick(np.asarray(values).reshape(members * k, -1),
                                np.asarray(jac).reshape(members * k, -1, n))
        values, jac = values.reshape(members, k, m), jac.reshape(members, k, m, n)
        return values.transpose(1, 0, 2).reshape(k, -1), jac.transpose(1, 0, 2, 3).reshape(k, -1, n)

    limit = ev.threshold_limit_state(plan.nataf.pull_back(stacked), plan.settings.thresholds,
                                     plan.settings.direction)
    return form(limit, starts, plan.settings.form).pf.reshape(members, m * t)


def member_spread(methods: list[str], member_pf: dict[str, np.ndarray], pf: np.ndarray, interval: np.ndarray,
                  reference: str | None, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """The members' ``Pf`` per method, their spread, and the combined interval of the reference method.

    Parameters
    ----------
    methods
        The dataset's ``reliability_method`` labels, in order.
    member_pf
        ``{method: [K, E]}`` the members' ``Pf`` of the methods that have them.
    pf, interval
        ``[M, E]`` and ``[M, E, 2]`` the ensemble mean's ``Pf`` and sampling intervals per method.
    reference
        The sampling reference of the verdict (None: none ran).
    level
        Probability of the intervals, in (0, 1).

    Returns
    -------
    per_member : ``[M, K, E]``
        NaN for a method without member estimates (SORM).
    std : ``[M, E]``
        The members' standard deviation (``ddof=1``).
    combined : ``[E, 2]``
        The reference's ``Pf`` and sampling interval widened by the surrogate's (FORM's ``Pf`` and the
        surrogate's interval alone when no sampling ran), clipped to ``[0, 1]``.
    spread_of : str
        The method whose members' spread widens ``combined``: the reference's where its members were sampled
        (importance sampling, Monte Carlo), else FORM's.
    """
    k = len(next(iter(member_pf.values())))
    per_member = np.full((len(methods), k, pf.shape[1]), np.nan)
    for name, values in member_pf.items():
        per_member[methods.index(name)] = values
    std = np.std(per_member, axis=1, ddof=1)  # NaN where a member's estimate is (SORM: every one)
    at = methods.index(reference or "form")
    spread_of = reference if reference in member_pf else "form"
    combined = combined_bounds(pf[at], None if reference is None else interval[at, :, 0],
                               None if reference is None else interval[at, :, 1], std[methods.index(spread_of)], k,
                               level)
    return per_member, std, np.clip(combined, 0.0, 1.0), spread_of
