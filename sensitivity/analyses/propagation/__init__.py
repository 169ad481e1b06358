"""Uncertainty propagation through a batched model, four methods side by side, with a linearity verdict.

The verb is ``propagate(model, inputs, Propagation(...), seed=...)``: the model a
:class:`~sensitivity.analyses.callables.BatchedModel`, the settings immutable objects
(:mod:`~sensitivity.analyses.propagation.settings`).

Given input uncertainty (:mod:`sensitivity.inputs.uncertainty`, shared with the indices and the posterior) with
mean ``mu`` and
covariance ``S``, and a model ``f: [K, n] -> [K, m]`` evaluated in batches
(:mod:`~sensitivity.analyses.propagation.evaluation`), each method returns the output mean, standard
deviation, covariance and quantiles as a labeled dataset
(:mod:`~sensitivity.analyses.propagation.dataset`):

``first_order``
    Delta method: mean ``f(mu)``, covariance ``J S J^T`` with ``J`` the Jacobian at ``mu``.
``second_order``
    Adds the Hessian terms ``1/2 tr(H_k S)`` to the mean and ``1/2 tr(H_k S H_l S)`` to the covariance.
``unscented``
    Scaled unscented transform on ``2n + 1`` sigma points.
``monte_carlo``
    Plain Monte Carlo or randomised QMC from the full input distribution, in independent replicates
    whose spread gives every standard error, in bounded memory.

Moment methods report normal-approximation quantiles ``mean + std Phi^-1(p)``; their standard errors
are NaN (no sampling). :func:`propagate` (:mod:`~sensitivity.analyses.propagation.driver`) runs several
methods and adds the verdict (:func:`nonlinearity_verdict`) comparing each with Monte Carlo.
:func:`pointwise_analysis` propagates the same covariance linearly through every Jacobian of a
stored sweep (``sigma_y = sqrt(diag(J S J^T))`` at each point, :func:`pointwise_std`). Through an ensemble
surrogate, :func:`member_moments` (:mod:`~sensitivity.analyses.propagation.ensemble`) gives every method's mean and
standard deviation per member, in one propagation of all members.
"""
from __future__ import annotations

from sensitivity.analyses.propagation.dataset import (
    DEFAULT_QUANTILES,
    STATUS_NON_FINITE,
    STATUS_OK,
    input_variables,
)
from sensitivity.analyses.propagation.driver import propagate
from sensitivity.analyses.propagation.ensemble import member_moments, merge_members
from sensitivity.analyses.propagation.evaluation import HessianFn, ValueAndJacobianFn, ValuesFn
from sensitivity.analyses.propagation.first_order import first_order
from sensitivity.analyses.propagation.monte_carlo import monte_carlo, replicate_plan
from sensitivity.analyses.propagation.pointwise import pointwise_analysis, pointwise_std
from sensitivity.analyses.propagation.second_order import second_order
from sensitivity.analyses.propagation.settings import METHODS, Method, MonteCarlo, Propagation, Unscented, Verdict
from sensitivity.analyses.propagation.unscented import sigma_points, unscented
from sensitivity.analyses.propagation.verdict import (
    VERDICT_CONSISTENT,
    VERDICT_NONLINEAR,
    VERDICT_NOT_ASSESSED,
    nonlinearity_verdict,
)

#: The package's face: its verbs, their settings and the result constants (helpers are imported from their modules).
__all__ = [
    "DEFAULT_QUANTILES", "METHODS", "MonteCarlo", "Propagation", "STATUS_NON_FINITE", "STATUS_OK", "Unscented",
    "VERDICT_CONSISTENT", "VERDICT_NONLINEAR", "VERDICT_NOT_ASSESSED", "Verdict", "member_moments", "merge_members",
    "pointwise_analysis", "propagate"
]
